"""What the Python object-store stand-ins (gcs_standin.py, azure_blob_standin.py)
share, imported from beside them: the threaded server on 127.0.0.1 and its
"PORT <n>" line, the options that model a store and its faults (--port, --rate,
--delay-ms, --fault, --fault-after, --fault-count, --log), the request log
(one JSON line per request), which GET a fault applies to, and a body sent at
--rate bytes/s."""

import json
import socket
import threading
import time
from http.server import ThreadingHTTPServer


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256

    def server_bind(self):
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        super().server_bind()


def add_store_options(ap, faults):
    """Adds the options every stand-in takes to the ArgumentParser `ap`;
    `faults` is --fault's help (the faults that stand-in knows)."""
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--rate", type=int, default=0, help="bytes/s per response (0: unlimited)")
    ap.add_argument("--delay-ms", type=int, default=0, help="delay before each response header")
    ap.add_argument("--fault", default="", help=faults)
    ap.add_argument("--fault-after", type=int, default=1, help="GETs answered well before the fault (default 1)")
    ap.add_argument("--fault-count", type=int, default=1 << 30, help="GETs the fault applies to (default: all)")
    ap.add_argument("--log", help="append one JSON line per request here")


class StoreState:
    """The options `a`, a lock, the GETs counted so far and the request log."""

    def __init__(self, a):
        self.a = a
        self.lock = threading.Lock()
        self.gets = 0
        self.log = open(a.log, "a", buffering=1) if a.log else None

    def write_log(self, entry):
        if self.log:
            with self.lock:
                self.log.write(json.dumps(entry) + "\n")

    def next_get(self):
        """Counts a GET; returns (its number, the --fault it gets, or "")."""
        a = self.a
        with self.lock:
            self.gets += 1
            n = self.gets
        return n, a.fault if a.fault and a.fault_after < n <= a.fault_after + a.fault_count else ""


def send_paced(read, write, count, rate):
    """Copies `count` bytes from read(n) to write(chunk) at most `rate` bytes/s
    (0: unlimited), in pieces of a hundredth of a second; stops early when
    read gives nothing."""
    start = time.monotonic()
    done = 0
    piece = max(rate // 100, 1) if rate else 1 << 20
    while done < count:
        chunk = read(min(piece, count - done, 1 << 20))
        if not chunk:
            return
        write(chunk)
        done += len(chunk)
        if rate:
            ahead = start + done / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)


def serve(srv):
    """Prints "PORT <n>" and serves until interrupted; returns 0."""
    print(f"PORT {srv.server_address[1]}", flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0
