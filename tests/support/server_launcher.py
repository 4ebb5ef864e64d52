"""The one launcher of the real servers both test suites run, all on 127.0.0.1
with free ports and stopped by PID: nginx (its own prefix and config, http
and/or https with a throwaway CA made by the openssl CLI) and a throwaway Ceph
cluster (one monitor, one memstore OSD, radosgw with one S3 user, ``auth none``
inside the cluster). Standard library only.

Two ways in:

- imported (tests/python/servers.py): ``Nginx``, ``RadosgwCluster``,
  ``make_test_ca``, ``Child``; a missing program raises ``ProgramMissing``,
  a server that does not come up ``ServerUnavailable``; every process started
  is stopped by its owner's ``close()`` and, as a backstop, at interpreter exit.
- run as a program (tests/support/http_harness.cpp, radosgw_cluster.cpp)::

      python3 server_launcher.py nginx --prefix=P --root=R --log-format=F [--port=N] [--tls-cert=C --tls-key=K] ...
      python3 server_launcher.py radosgw --dir=D --access-key=K --secret-key=S --uid=U
      python3 server_launcher.py ca --dir=D

  It starts the server, waits until it answers, prints one JSON line (its
  ports and paths) and, for nginx and radosgw, stops every process it started
  when its stdin closes (the parent ended, even by a crash) or it gets
  SIGTERM, SIGINT or SIGHUP. Exit status 77 (skipped) when a program is
  missing, or the Ceph cluster does not come up; "skipped: why" on stderr.
"""

import argparse
import atexit
import json
import os
import pathlib
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
import urllib.parse

__all__ = [
    "ServerUnavailable", "ProgramMissing", "require", "free_port", "wait_for_port", "Child", "run", "TestCA",
    "make_test_ca", "Nginx", "RadosgwCluster", "make_world_readable",
]


class ServerUnavailable(RuntimeError):
    """A server cannot run here (a program is missing or did not come up); test fixtures skip on it."""


class ProgramMissing(ServerUnavailable):
    """A program the server needs is not installed."""


def require(*programs):
    """Raises ProgramMissing for the first of ``programs`` that is not on PATH."""
    for p in programs:
        if shutil.which(p) is None:
            raise ProgramMissing(f"{p} is not installed")


def free_port(avoid=()):
    """A TCP port on 127.0.0.1 that was free a moment ago (none of ``avoid``)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in avoid:
            return port


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


def make_world_readable(path):
    """Makes every directory from ``path`` up to the root traversable by others, and
    everything under ``path`` readable (nginx's workers run as another user)."""
    p = pathlib.Path(path).resolve()
    for d in [p, *p.parents]:
        if d.is_dir() and d != d.parent:
            d.chmod(d.stat().st_mode | stat.S_IXOTH | stat.S_IXGRP)
    if p.is_dir():
        for dirpath, dirnames, filenames in os.walk(p):
            for name in dirnames:
                q = pathlib.Path(dirpath, name)
                q.chmod(q.stat().st_mode | stat.S_IROTH | stat.S_IXOTH)
            for name in filenames:
                q = pathlib.Path(dirpath, name)
                q.chmod(q.stat().st_mode | stat.S_IROTH)
        p.chmod(p.stat().st_mode | stat.S_IROTH | stat.S_IXOTH)


# ---------------------------------------------------------------- TLS

class TestCA:
    """A throwaway CA and a server certificate for IP 127.0.0.1 (PEM files)."""

    __test__ = False  # not a pytest test class

    def __init__(self, ca_cert, server_cert, server_key):
        self.ca_cert, self.server_cert, self.server_key = ca_cert, server_cert, server_key


def make_test_ca(directory):
    """Makes the CA and the server certificate under ``directory`` with the openssl CLI."""
    require("openssl")
    d = pathlib.Path(directory).resolve()
    d.mkdir(parents=True, exist_ok=True)
    log = d / "openssl.log"
    (d / "ext.cnf").write_text("subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n")
    run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", d / "ca.key", "-out", d / "ca.crt",
         "-days", "2", "-subj", "/CN=ringsafe test CA", "-addext", "basicConstraints=critical,CA:TRUE",
         "-addext", "keyUsage=critical,keyCertSign,cRLSign"], log)
    run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", d / "server.key", "-out", d / "server.csr",
         "-subj", "/CN=127.0.0.1"], log)
    run(["openssl", "x509", "-req", "-in", d / "server.csr", "-CA", d / "ca.crt", "-CAkey", d / "ca.key",
         "-CAcreateserial", "-out", d / "server.crt", "-days", "2", "-extfile", d / "ext.cnf"], log)
    return TestCA(d / "ca.crt", d / "server.crt", d / "server.key")


# ---------------------------------------------------------------- nginx

class Nginx:
    """One nginx (``daemon off``) under its own ``prefix`` (``nginx.conf``, ``nginx.pid``,
    ``logs/``, ``tmp/``) serving ``root`` on 127.0.0.1: plain http on ``port`` when
    ``http``, https on ``tls_port`` with ``tls`` (a TestCA); ``server_body`` goes into each
    server block, ``http_extra`` into ``http { }`` (further servers). Access log:
    ``logs/access.log`` in ``log_format`` (named ``rs``, which ``http_extra`` may use).
    ``workers`` worker processes under a master, or one process with no master when
    ``master_process`` is False. ``port``/``tls_port`` None: free ports."""

    def __init__(self, root, prefix, *, log_format, tls=None, http=True, server_body="", http_extra="",
                 workers=1, master_process=True, port=None, tls_port=None):
        require("nginx")
        self.root = pathlib.Path(root).resolve()
        self.prefix = p = pathlib.Path(prefix).resolve()
        (p / "logs").mkdir(parents=True, exist_ok=True)
        (p / "tmp").mkdir(exist_ok=True)
        if master_process:  # the workers drop root for another user
            make_world_readable(self.root)
        self.port = (port or free_port()) if http else None
        self.tls_port = (tls_port or free_port(avoid={self.port})) if tls else None
        servers = ""
        for listen, ssl in ((self.port, False), (self.tls_port, True)):
            if listen is None:
                continue
            servers += f"  server {{\n    listen 127.0.0.1:{listen}{' ssl' if ssl else ''};\n    root {self.root};\n"
            if ssl:
                servers += (f"    ssl_certificate {tls.server_cert};\n    ssl_certificate_key {tls.server_key};\n"
                            "    ssl_protocols TLSv1.2 TLSv1.3;\n")
            servers += f"{server_body}\n  }}\n"
        conf = (
            "daemon off;\n" + ("" if master_process else "master_process off;\n")
            + f"worker_processes {workers};\n"
            f"pid {p}/nginx.pid;\nerror_log {p}/logs/error.log;\n"
            "events { worker_connections 512; }\n"
            "http {\n"
            f"  client_body_temp_path {p}/tmp/body;\n  proxy_temp_path {p}/tmp/proxy;\n"
            f"  fastcgi_temp_path {p}/tmp/fastcgi;\n  uwsgi_temp_path {p}/tmp/uwsgi;\n"
            f"  scgi_temp_path {p}/tmp/scgi;\n"
            f"  log_format rs '{log_format}';\n"
            f"  access_log {p}/logs/access.log rs;\n"
            "  default_type application/octet-stream;\n  sendfile on;\n  tcp_nopush on;\n"
            "  keepalive_requests 100000;\n  keepalive_timeout 60s;\n"
            f"{servers}{http_extra}\n"
            "}\n")
        (p / "nginx.conf").write_text(conf)
        (p / "logs" / "access.log").touch()
        self.child = Child(["nginx", "-p", p, "-c", p / "nginx.conf"], p / "logs" / "stderr.log")
        try:
            for listen in (self.port, self.tls_port):
                if listen is not None:
                    wait_for_port(listen, alive=self.child.alive)
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

    def describe(self):
        """What the launcher prints for it."""
        return {"pid": self.child.pid, "port": self.port, "tls_port": self.tls_port, "prefix": str(self.prefix)}

    def close(self):
        self.child.stop()


# ---------------------------------------------------------------- radosgw

class RadosgwCluster:
    """A throwaway Ceph cluster under ``directory``: one monitor, one
    memory-backed OSD (memstore), ``auth none`` inside the cluster, radosgw
    on 127.0.0.1 and one S3 user (``uid``, access_key / secret_key). ~15 s to start;
    ready when a signed request works. Raises ServerUnavailable when Ceph is
    missing or does not come up."""

    access_key = "RINGSAFEPYTESTKEY"
    secret_key = "ringsafe-python-test-secret"
    uid = "ringsafe-py"
    region = "us-east-1"

    def __init__(self, directory, start_timeout=90.0, memstore_bytes=1 << 30, access_key=None, secret_key=None,
                 uid=None):
        """``memstore_bytes``: the OSD's memory (objects larger than about half of it do not fit)."""
        require("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph", "curl")
        self.access_key = access_key or self.access_key
        self.secret_key = secret_key or self.secret_key
        self.uid = uid or self.uid
        self.dir = d = pathlib.Path(directory).resolve()
        for sub in ("mon", "osd", "run"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        self.daemons = []
        mon_port = free_port()
        self.port = free_port(avoid={mon_port})
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
            run(["radosgw-admin", *c, "user", "create", f"--uid={self.uid}", f"--display-name={self.uid}",
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

    def describe(self):
        """What the launcher prints for it."""
        return {"port": self.port, "endpoint": self.endpoint, "dir": str(self.dir)}

    def close(self):
        for child in reversed(self.daemons):  # rgw, osd, mon
            child.stop(grace=15.0)
        self.daemons = []


# ---------------------------------------------------------------- the program

def _arguments(argv):
    ap = argparse.ArgumentParser(prog="server_launcher.py", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="kind", required=True)
    n = sub.add_parser("nginx", help="nginx serving --root")
    n.add_argument("--prefix", required=True)
    n.add_argument("--root", required=True)
    n.add_argument("--log-format", required=True, help="the access log's format (named rs)")
    n.add_argument("--port", type=int, help="the http (or, with --no-http, https) port; default: a free one")
    n.add_argument("--tls-cert", help="the server certificate (made by `ca`): https too")
    n.add_argument("--tls-key", help="its key")
    n.add_argument("--no-http", action="store_true", help="with --tls-cert: https only")
    n.add_argument("--server-body", default="", help="text inside each server { }")
    n.add_argument("--http-extra", default="", help="text inside http { }")
    n.add_argument("--workers", type=int, default=1)
    n.add_argument("--no-master", action="store_true", help="one process (master_process off)")
    r = sub.add_parser("radosgw", help="a throwaway Ceph cluster with radosgw and one S3 user")
    r.add_argument("--dir", required=True)
    r.add_argument("--access-key", required=True)
    r.add_argument("--secret-key", required=True)
    r.add_argument("--uid", required=True)
    c = sub.add_parser("ca", help="a throwaway CA and a server certificate for 127.0.0.1; exits once made")
    c.add_argument("--dir", required=True)
    return ap.parse_args(argv)


def _start(a):
    if a.kind == "ca":
        ca = make_test_ca(a.dir)
        return None, {"ca_cert": str(ca.ca_cert), "server_cert": str(ca.server_cert), "server_key": str(ca.server_key)}
    if a.kind == "nginx":
        tls = None
        if a.tls_cert:
            tls = TestCA(None, pathlib.Path(a.tls_cert).resolve(), pathlib.Path(a.tls_key).resolve())
        http = not (a.no_http and tls)
        server = Nginx(a.root, a.prefix, log_format=a.log_format, tls=tls, http=http, server_body=a.server_body,
                       http_extra=a.http_extra, workers=a.workers, master_process=not a.no_master,
                       port=a.port if http else None, tls_port=None if http else a.port)
    else:
        server = RadosgwCluster(a.dir, access_key=a.access_key, secret_key=a.secret_key, uid=a.uid)
    return server, server.describe()


def _stop_on_signal(signum, frame):
    raise SystemExit(128 + signum)


def main(argv=None):
    """Starts what the arguments name, prints it as one JSON line, and stops it when
    stdin closes or a signal comes; 77 when it cannot run here."""
    a = _arguments(argv)
    for s in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(s, _stop_on_signal)
    server = None
    try:
        try:
            server, described = _start(a)
        except ProgramMissing as e:
            print(f"skipped: {e}", file=sys.stderr, flush=True)
            return 77
        except ServerUnavailable as e:
            if a.kind == "radosgw":
                print(f"skipped: {e}", file=sys.stderr, flush=True)
                return 77
            print(f"server_launcher: {e}", file=sys.stderr, flush=True)
            return 1
        sys.stdout.write(json.dumps(described) + "\n")
        sys.stdout.flush()
        if server is not None:
            while sys.stdin.buffer.read(65536):  # until the parent closes it or ends
                pass
        return 0
    finally:
        if server is not None:
            server.close()


if __name__ == "__main__":
    sys.exit(main())
