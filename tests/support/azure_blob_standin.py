#!/usr/bin/env python3
"""An Azure Blob service stand-in for tests and benchmarks (Python stdlib only;
Azurite is npm-only and cannot be installed here). It speaks the real Blob
protocol for the calls a reader and azure-storage-blob's upload/download make:

  PUT  /ACCOUNT/CONTAINER?restype=container     Create Container
  PUT  /ACCOUNT/CONTAINER/BLOB                  Put Blob (x-ms-blob-type: BlockBlob)
  GET  /ACCOUNT/CONTAINER/BLOB                  Get Blob: x-ms-range (wins) or Range, 206 / 416
  HEAD /ACCOUNT/CONTAINER/BLOB                  Get Blob Properties

on 127.0.0.1 with the emulator's path-style URLs, blobs being files under
--data (DATA/CONTAINER/BLOB). Every authorized request must carry
x-ms-version (a YYYY-MM-DD date; optional for anonymous ones, as Azure has it),
and each is authorized as the service would authorize it:
Shared Key (the string to sign rebuilt from the request, Range included, the
account named twice for path-style URLs; x-ms-date within 15 minutes), an
account SAS in the query (signature, expiry, read permission), or nothing at
all for containers listed with --public. A wrong signature is 403
AuthenticationFailed. ETags are strong ("0x" + the file's mtime in ns) and
If-Match / If-None-Match are honoured (412 ConditionNotMet).

Prints "PORT <n>" once listening (--port 0: any free port). Options model an
object store (--rate bytes/s per response, --delay-ms before each response
header) and hostile answers (--fault, after --fault-after good GETs, for --fault-count GETs):
  badrange   Content-Range shifted by one byte     size     another total in Content-Range
  short      half the body, then the connection closes
  etag       206 with another ETag (If-Match ignored)
  change     the blob is rewritten (new ETag; If-Match then fails with 412)
  redirect:URL  307 to URL + the request's path and query (another host or scheme)
--log FILE appends one JSON line per request: method, path, query, range,
x_ms_range, authorization (the scheme only: SharedKey, SAS or none),
x_ms_version, if_match, status. Secrets are never logged.
"""

import argparse
import base64
import email.utils
import hashlib
import hmac
import os
import re
import sys
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

from standin_server import Server, StoreState, add_store_options, send_paced, serve

MAX_SKEW = 15 * 60


class Store(StoreState):
    def __init__(self, a):
        super().__init__(a)
        self.account = a.account
        self.key = base64.b64decode(a.key)
        self.data = os.path.abspath(a.data)

    def path_of(self, container, blob):
        p = os.path.abspath(os.path.join(self.data, container, blob))
        if not p.startswith(self.data + os.sep):
            return None
        return p


def etag_of(path):
    return '"0x%X"' % os.stat(path).st_mtime_ns


def sign(key, text):
    return base64.b64encode(hmac.new(key, text.encode("utf-8"), hashlib.sha256).digest()).decode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ringsafe-azure-blob-standin"

    def log_message(self, *args):
        pass

    # ------------------------------------------------------------ helpers
    def reply(self, status, code=None, message="", headers=None, body=b""):
        store = self.server.store
        if code:
            body = (f'<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code>'
                    f"<Message>{message}</Message></Error>").encode()
        self.send_response(status)
        self.send_header("x-ms-request-id", "%08x" % (id(self) & 0xFFFFFFFF))
        self.send_header("x-ms-version", self.headers.get("x-ms-version", "2025-01-05"))
        if code:
            self.send_header("x-ms-error-code", code)
            self.send_header("Content-Type", "application/xml")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body and self.command != "HEAD":
            self.wfile.write(body)
        self.entry["status"] = status
        store.write_log(self.entry)

    def string_to_sign(self, account, raw_path, query):
        h = {k.lower(): v.strip() for k, v in self.headers.items()}
        length = h.get("content-length", "")
        if length == "0":
            length = ""
        parts = [self.command, h.get("content-encoding", ""), h.get("content-language", ""), length,
                 h.get("content-md5", ""), h.get("content-type", ""), h.get("date", ""),
                 h.get("if-modified-since", ""), h.get("if-match", ""), h.get("if-none-match", ""),
                 h.get("if-unmodified-since", ""), h.get("range", "")]
        s = "\n".join(parts) + "\n"
        for k in sorted(k for k in h if k.startswith("x-ms-")):
            s += f"{k}:{h[k]}\n"
        s += "/" + account + raw_path
        params = {}
        for name, value in urllib.parse.parse_qsl(query, keep_blank_values=True):
            params.setdefault(name.lower(), []).append(value)
        for name in sorted(params):
            s += "\n" + name + ":" + ",".join(sorted(params[name]))
        return s

    def authorize(self, raw_path, query, container, write):
        """None when allowed, else (status, code, message)."""
        store = self.server.store
        auth = self.headers.get("Authorization")
        q = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        if auth:
            self.entry["authorization"] = auth.split(" ", 1)[0]
            m = re.fullmatch(r"SharedKey ([^:]+):(.+)", auth)
            if not m or m.group(1) != store.account:
                return 403, "AuthenticationFailed", "unknown authorization scheme or account"
            date = self.headers.get("x-ms-date") or self.headers.get("Date")
            if not date:
                return 403, "AuthenticationFailed", "x-ms-date is missing"
            try:
                when = email.utils.parsedate_to_datetime(date).timestamp()
            except (TypeError, ValueError):
                return 403, "AuthenticationFailed", "x-ms-date is malformed"
            if abs(when - time.time()) > MAX_SKEW:
                return 403, "AuthenticationFailed", "request time is out of range"
            expected = sign(store.key, self.string_to_sign(store.account, raw_path, query))
            if not hmac.compare_digest(expected, m.group(2)):
                return 403, "AuthenticationFailed", "signature mismatch"
            return None
        if "sig" in q:
            self.entry["authorization"] = "SAS"
            if "ss" not in q:
                return 403, "AuthenticationFailed", "only account SAS tokens are supported here"
            fields = [store.account, q.get("sp", ""), q.get("ss", ""), q.get("srt", ""), q.get("st", ""),
                      q.get("se", ""), q.get("sip", ""), q.get("spr", ""), q.get("sv", "")]
            if q.get("sv", "") >= "2020-12-06":
                fields.append(q.get("ses", ""))
            if not hmac.compare_digest(sign(store.key, "\n".join(fields) + "\n"), q["sig"]):
                return 403, "AuthenticationFailed", "SAS signature mismatch"
            try:
                expiry = time.mktime(time.strptime(q.get("se", ""), "%Y-%m-%dT%H:%M:%SZ")) - time.timezone
            except ValueError:
                return 403, "AuthenticationFailed", "SAS expiry is malformed"
            if expiry < time.time():
                return 403, "AuthenticationFailed", "SAS expired"
            if "b" not in q.get("ss", "") or ("w" if write else "r") not in q.get("sp", ""):
                return 403, "AuthorizationPermissionMismatch", "SAS lacks the permission"
            return None
        self.entry["authorization"] = "none"
        if not write and container in self.server.store.a.public:
            return None
        return 404 if not write else 403, "ResourceNotFound", "anonymous access is not allowed"

    def parse(self):
        raw = self.path
        raw_path, _, query = raw.partition("?")
        self.entry = {"method": self.command, "path": raw_path, "query": query,
                      "range": self.headers.get("Range", ""), "x_ms_range": self.headers.get("x-ms-range", ""),
                      "authorization": "", "x_ms_version": self.headers.get("x-ms-version", ""),
                      "if_match": self.headers.get("If-Match", ""), "status": 0}
        segs = urllib.parse.unquote(raw_path).lstrip("/").split("/", 2)
        return raw_path, query, segs

    def common(self, write):
        raw_path, query, segs = self.parse()
        store = self.server.store
        version = self.headers.get("x-ms-version", "")
        # Required for authorized requests, optional for anonymous ones (Azure's rule).
        if (version or self.headers.get("Authorization")) and not re.fullmatch(r"20\d\d-\d\d-\d\d", version):
            self.reply(400, "MissingRequiredHeader" if not version else "InvalidHeaderValue", "x-ms-version")
            return None
        if len(segs) < 2 or segs[0] != store.account or not segs[1]:
            self.reply(400, "InvalidUri", "expected /ACCOUNT/CONTAINER[/BLOB]")
            return None
        container = segs[1]
        blob = segs[2] if len(segs) > 2 else ""
        denied = self.authorize(raw_path, query, container, write)
        if denied:
            self.reply(*denied)
            return None
        return query, container, blob

    def conditions(self, path):
        tag = etag_of(path)
        im = self.headers.get("If-Match")
        if im and im != "*" and im != tag:
            return 412, tag
        inm = self.headers.get("If-None-Match")
        if inm and (inm == "*" or inm == tag):
            return 304, tag
        return None, tag

    # ------------------------------------------------------------ verbs
    def do_PUT(self):
        got = self.common(write=True)
        length = int(self.headers.get("Content-Length", "0") or 0)
        body = self.rfile.read(length) if length else b""
        if not got:
            return
        query, container, blob = got
        store = self.server.store
        if "restype=container" in query and not blob:
            d = store.path_of(container, "x")
            os.makedirs(os.path.dirname(d), exist_ok=True)
            return self.reply(201)
        if self.headers.get("x-ms-blob-type") != "BlockBlob":
            return self.reply(400, "InvalidHeaderValue", "x-ms-blob-type must be BlockBlob")
        path = store.path_of(container, blob)
        if path is None or not os.path.isdir(os.path.join(store.data, container)):
            return self.reply(404, "ContainerNotFound", "no such container")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = path + ".standin-part"
        with open(tmp, "wb") as f:
            f.write(body)
        os.replace(tmp, path)
        md5 = base64.b64encode(hashlib.md5(body).digest()).decode()
        self.reply(201, headers={"ETag": etag_of(path), "Last-Modified": self.http_date(path), "Content-MD5": md5,
                                 "x-ms-request-server-encrypted": "true"})

    def http_date(self, path):
        return email.utils.formatdate(os.stat(path).st_mtime, usegmt=True)

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        got = self.common(write=False)
        if not got:
            return
        _, container, blob = got
        store = self.server.store
        a = store.a
        path = store.path_of(container, blob) if blob else None
        if path is None or not os.path.isfile(path):
            return self.reply(404, "BlobNotFound", "The specified blob does not exist.")
        status, tag = self.conditions(path)
        if status == 412:
            return self.reply(412, "ConditionNotMet", "The condition specified using HTTP conditional header(s) is not met.")
        if status == 304:
            return self.reply(304, headers={"ETag": tag})
        size = os.path.getsize(path)
        base = {"ETag": tag, "Last-Modified": self.http_date(path), "x-ms-blob-type": "BlockBlob",
                "Accept-Ranges": "bytes", "Content-Type": "application/octet-stream",
                "x-ms-creation-time": self.http_date(path), "x-ms-lease-state": "available",
                "x-ms-lease-status": "unlocked", "x-ms-server-encrypted": "true"}
        if self.command == "HEAD":
            base["Content-Length"] = str(size)
            self.send_response(200)
            self.send_header("x-ms-version", self.headers.get("x-ms-version"))
            for k, v in base.items():
                self.send_header(k, v)
            self.end_headers()
            self.entry["status"] = 200
            store.write_log(self.entry)
            return
        spec = self.headers.get("x-ms-range") or self.headers.get("Range")
        first, last = 0, size - 1
        partial = False
        if spec:
            m = re.fullmatch(r"bytes=(\d+)-(\d*)", spec.strip())
            if not m:
                return self.reply(416, "InvalidRange", "The range specified is invalid for the current size of the resource.",
                                  headers={"Content-Range": f"bytes */{size}"})
            first = int(m.group(1))
            last = min(int(m.group(2)), size - 1) if m.group(2) else size - 1
            if first >= size or last < first:
                return self.reply(416, "InvalidRange", "The range specified is invalid for the current size of the resource.",
                                  headers={"Content-Range": f"bytes */{size}"})
            partial = True
        n, fault = store.next_get()
        if fault.startswith("redirect:"):
            raw_path, _, query = self.path.partition("?")
            return self.reply(307, headers={"Location": fault[len("redirect:"):] + raw_path + ("?" + query if query else "")})
        if fault == "change":
            os.utime(path, ns=(time.time_ns(), os.stat(path).st_mtime_ns + 1000))
            status, tag = self.conditions(path)
            if status == 412:
                return self.reply(412, "ConditionNotMet", "The condition specified using HTTP conditional header(s) is not met.")
            base["ETag"] = tag
        if fault == "etag":
            base["ETag"] = '"0x%X"' % (os.stat(path).st_mtime_ns + n)
        count = last - first + 1
        total = size + 1 if fault == "size" else size
        shown = first + 1 if fault == "badrange" else first
        if a.delay_ms:
            time.sleep(a.delay_ms / 1000)
        self.send_response(206 if partial else 200)
        self.send_header("x-ms-version", self.headers.get("x-ms-version"))
        self.send_header("x-ms-request-id", "%08x" % n)
        for k, v in base.items():
            self.send_header(k, v)
        if partial:
            self.send_header("Content-Range", f"bytes {shown}-{shown + count - 1}/{total}")
        self.send_header("Content-Length", str(count))
        self.end_headers()
        self.entry["status"] = 206 if partial else 200
        store.write_log(self.entry)
        send = count // 2 if fault == "short" else count
        self.send_file(path, first, send, a.rate)
        if fault == "short":
            self.close_connection = True

    def send_file(self, path, offset, count, rate):
        self.wfile.flush()
        sock = self.connection
        with open(path, "rb") as f:
            if not rate:
                while count > 0:
                    sent = os.sendfile(sock.fileno(), f.fileno(), offset, min(count, 1 << 30))
                    if sent <= 0:
                        return
                    offset += sent
                    count -= sent
                return
            f.seek(offset)
            send_paced(f.read, sock.sendall, count, rate)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_store_options(ap, "badrange, size, short, etag, change or redirect:URL")
    ap.add_argument("--data", required=True, help="DATA/CONTAINER/BLOB are the blobs")
    ap.add_argument("--account", default="devstoreaccount1")
    ap.add_argument("--key", required=True, help="the account key, base64")
    ap.add_argument("--public", action="append", default=[], help="a container readable without credentials")
    a = ap.parse_args()
    os.makedirs(a.data, exist_ok=True)
    srv = Server(("127.0.0.1", a.port), Handler)
    srv.store = Store(a)
    return serve(srv)


if __name__ == "__main__":
    sys.exit(main())
