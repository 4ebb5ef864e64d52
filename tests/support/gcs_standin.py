#!/usr/bin/env python3
"""Google's side of gs:// for tests and benchmarks (Python stdlib and the
openssl CLI), on 127.0.0.1, in front of a real fake-gcs-server (--upstream):

  POST /token       an OAuth 2.0 token endpoint. A service account's JWT grant
                    (grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer) is
                    checked as Google checks it: the RS256 signature against
                    --public-key (openssl dgst -verify), iss = --client-email,
                    aud = this endpoint's URL, a devstorage scope, iat near now,
                    exp after now and at most iat + 3600. A refresh-token grant
                    must carry --client-id, --client-secret and --refresh-token.
                    Answers {"access_token", "expires_in": --expires-in, "token_type"}
                    or 400 {"error": "invalid_grant", "error_description": why}.
  GET  /computeMetadata/v1/instance/service-accounts/default/token
                    the metadata server's token (Metadata-Flavor: Google required).
  anything else     proxied to --upstream (fake-gcs-server's XML API), which
                    does not check credentials: with --require-token a request
                    without a Bearer token this server issued is 401; with
                    --hmac-id/--hmac-secret a GOOG4-HMAC-SHA256 Authorization is
                    checked as GCS checks it (the canonical request rebuilt from
                    the request as received: path, sorted query, signed headers)
                    and a wrong one is 403 SignatureDoesNotMatch. Options
                    model an object store (--rate bytes/s per response,
                    --delay-ms before each response header) and hostile answers
                    (--fault, after --fault-after good GETs, for --fault-count GETs):
                      badrange   Content-Range shifted by one byte
                      short      half the body, then the connection closes
                      generation another x-goog-generation (the object was replaced)
                      nogeneration  no x-goog-generation, and the generation asked for
                                 is not passed on (the current object is served)
                      redirect:URL  307 to URL + the request's path and query

Prints "PORT <n>" once listening (--port 0: any free port). --log FILE
appends one JSON line per request: method, path, query, range,
authorization (the scheme only: Bearer, GOOG4-HMAC-SHA256, none), token_ok
(a token this server issued), status; never a token or a key.
"""

import argparse
import base64
import hashlib
import hmac
import http.client
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

from standin_server import Server, StoreState, add_store_options, send_paced, serve

JWT_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"


def b64url_decode(s):
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


class State(StoreState):
    def __init__(self, a):
        super().__init__(a)
        self.tokens = set()
        self.issued = 0
        up = urllib.parse.urlsplit(a.upstream) if a.upstream else None
        self.upstream = (up.hostname, up.port or 80) if up else None

    def issue(self):
        with self.lock:
            self.issued += 1
            tok = "ya29.standin-%d-%s" % (self.issued, base64.urlsafe_b64encode(os.urandom(12)).decode())
            self.tokens.add(tok)
            return tok


def goog4_valid(command, raw_path, query, headers, authorization, access_id, secret):
    """Whether `authorization` (GOOG4-HMAC-SHA256 Credential=ID/DATE/REGION/storage/goog4_request,
    SignedHeaders=..., Signature=...) signs this request with `secret`."""
    try:
        alg, rest = authorization.split(" ", 1)
        parts = dict(p.strip().split("=", 1) for p in rest.split(","))
        cred = parts["Credential"].split("/")
        signed = parts["SignedHeaders"].split(";")
    except (ValueError, KeyError):
        return False
    if alg != "GOOG4-HMAC-SHA256" or len(cred) != 5 or cred[0] != access_id or cred[3:] != ["storage", "goog4_request"]:
        return False
    lower = {k.lower(): v.strip() for k, v in headers.items()}
    if any(h not in lower for h in signed):
        return False
    params = sorted(p if "=" in p else p + "=" for p in query.split("&") if p)
    canonical = "\n".join([command, raw_path, "&".join(params)] + [f"{h}:{lower[h]}" for h in signed] +
                          ["", ";".join(signed), lower.get("x-goog-content-sha256", "UNSIGNED-PAYLOAD")])
    stamp = lower.get("x-goog-date", "")
    scope = "/".join(cred[1:])
    to_sign = "\n".join(["GOOG4-HMAC-SHA256", stamp, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = ("GOOG4" + secret).encode()
    for part in cred[1:]:
        key = hmac.new(key, part.encode(), hashlib.sha256).digest()
    return hmac.compare_digest(hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest(), parts.get("Signature", ""))


def verify_rs256(signing_input, signature, public_key):
    with tempfile.TemporaryDirectory() as d:
        sig = os.path.join(d, "sig")
        with open(sig, "wb") as f:
            f.write(signature)
        r = subprocess.run(["openssl", "dgst", "-sha256", "-verify", public_key, "-signature", sig],
                           input=signing_input, capture_output=True)
        return r.returncode == 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def json_reply(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.entry["status"] = status
        self.server.state.write_log(self.entry)

    def start(self):
        raw_path, _, query = self.path.partition("?")
        auth = self.headers.get("Authorization", "")
        st = self.server.state
        token_ok = auth.startswith("Bearer ") and auth[len("Bearer "):] in st.tokens
        self.entry = {"method": self.command, "path": raw_path, "query": query, "range": self.headers.get("Range", ""),
                      "authorization": auth.split(" ", 1)[0] if auth else "none", "token_ok": token_ok, "status": 0}
        return raw_path, query, token_ok

    def token(self):
        st = self.server.state
        a = st.a
        length = int(self.headers.get("Content-Length", "0") or 0)
        form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
        grant = form.get("grant_type", "")
        bad = lambda why: self.json_reply(400, {"error": "invalid_grant", "error_description": why})  # noqa: E731
        if grant == JWT_GRANT:
            parts = form.get("assertion", "").split(".")
            if len(parts) != 3:
                return bad("the assertion is not a compact JWS")
            try:
                header = json.loads(b64url_decode(parts[0]))
                claims = json.loads(b64url_decode(parts[1]))
                signature = b64url_decode(parts[2])
            except ValueError:
                return bad("the assertion does not decode")
            if header.get("alg") != "RS256":
                return bad("alg must be RS256")
            if not a.public_key or not verify_rs256((parts[0] + "." + parts[1]).encode(), signature, a.public_key):
                return bad("Invalid JWT Signature.")
            now = time.time()
            me = f"http://127.0.0.1:{self.server.server_address[1]}/token"
            if claims.get("iss") != a.client_email:
                return bad("iss is not the service account")
            if claims.get("aud") != me:
                return bad("aud is not this token endpoint")
            if "devstorage" not in str(claims.get("scope", "")):
                return bad("no Cloud Storage scope")
            iat, exp = claims.get("iat"), claims.get("exp")
            if not isinstance(iat, int) or not isinstance(exp, int) or abs(iat - now) > 300 or exp <= now or exp - iat > 3600:
                return bad("iat/exp are not a valid lifetime")
        elif grant == "refresh_token":
            if (form.get("client_id"), form.get("client_secret"), form.get("refresh_token")) != (
                    a.client_id, a.client_secret, a.refresh_token):
                return bad("Bad Request")
        else:
            return self.json_reply(400, {"error": "unsupported_grant_type"})
        return self.json_reply(200, {"access_token": st.issue(), "expires_in": a.expires_in, "token_type": "Bearer"})

    def do_POST(self):
        raw_path, _, _ = self.start()
        if raw_path == "/token":
            return self.token()
        return self.json_reply(404, {"error": "not found"})

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        raw_path, query, token_ok = self.start()
        st = self.server.state
        a = st.a
        if raw_path == "/computeMetadata/v1/instance/service-accounts/default/token":
            if self.headers.get("Metadata-Flavor") != "Google":
                return self.json_reply(403, {"error": "Metadata-Flavor: Google is required"})
            return self.json_reply(200, {"access_token": st.issue(), "expires_in": a.expires_in, "token_type": "Bearer"})
        if a.require_token and not token_ok:
            return self.json_reply(401, {"error": {"code": 401, "message": "Anonymous caller does not have storage.objects.get access"}})
        auth = self.headers.get("Authorization", "")
        if a.hmac_id and auth.startswith("GOOG4-HMAC-SHA256 ") and not goog4_valid(
                self.command, raw_path, query, self.headers, auth, a.hmac_id, a.hmac_secret):
            return self.json_reply(403, {"error": {"code": 403, "message": "SignatureDoesNotMatch"}})
        _, fault = st.next_get()
        if fault.startswith("redirect:"):
            self.send_response(307)
            self.send_header("Location", fault[len("redirect:"):] + self.path)
            self.send_header("Content-Length", "0")
            self.end_headers()
            self.entry["status"] = 307
            return st.write_log(self.entry)
        self.proxy(fault)

    def proxy(self, fault):
        st = self.server.state
        a = st.a
        conn = http.client.HTTPConnection(*st.upstream, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("authorization", "host", "connection")}
        target = self.path
        if fault == "nogeneration":
            path, _, query = target.partition("?")
            query = "&".join(p for p in query.split("&") if p and not p.startswith("generation="))
            target = path + ("?" + query if query else "")
        conn.request(self.command, target, headers=headers)
        r = conn.getresponse()
        if a.delay_ms:
            time.sleep(a.delay_ms / 1000)
        self.send_response(r.status)
        length = None
        for k, v in r.getheaders():
            lk = k.lower()
            if lk in ("connection", "transfer-encoding", "date", "server"):
                continue
            if lk == "content-length":
                length = int(v)
            if lk == "content-range" and fault == "badrange" and r.status == 206:
                span, _, total = v[len("bytes "):].partition("/")
                lo, _, hi = span.partition("-")
                v = f"bytes {int(lo) + 1}-{int(hi) + 1}/{total}"
            if lk == "x-goog-generation" and fault == "nogeneration":
                continue
            if lk == "x-goog-generation" and fault == "generation":
                v = str(int(v) + 1)
            self.send_header(k, v)
        if length is None:
            body = r.read()
            length = len(body)
            self.send_header("Content-Length", str(length))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.end_headers()
            send = length // 2 if fault == "short" and r.status == 206 else length
            send_paced(r.read, self.wfile.write, send, a.rate)
            if send < length:
                self.close_connection = True
        conn.close()
        self.entry["status"] = r.status
        st.write_log(self.entry)



def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_store_options(ap, "badrange, short, generation, nogeneration or redirect:URL")
    ap.add_argument("--upstream", help="fake-gcs-server's http://127.0.0.1:PORT")
    ap.add_argument("--public-key", help="PEM public key of the service account")
    ap.add_argument("--client-email", default="ringsafe-test@ringsafe-test.iam.gserviceaccount.com")
    ap.add_argument("--client-id", default="ringsafe-client-id")
    ap.add_argument("--client-secret", default="ringsafe-client-secret")
    ap.add_argument("--refresh-token", default="ringsafe-refresh-token")
    ap.add_argument("--expires-in", type=int, default=3600)
    ap.add_argument("--require-token", action="store_true")
    ap.add_argument("--hmac-id", default="", help="an HMAC key's access id: GOOG4 signatures are checked")
    ap.add_argument("--hmac-secret", default="", help="that key's secret")
    a = ap.parse_args()
    srv = Server(("127.0.0.1", a.port), Handler)
    srv.state = State(a)
    return serve(srv)


if __name__ == "__main__":
    sys.exit(main())
