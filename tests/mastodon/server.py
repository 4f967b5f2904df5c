#!/usr/bin/env python3
"""A Mastodon-compatible server for the end-to-end tests, written from the published API
documentation (docs.joinmastodon.org): accounts/verify_credentials, v2 instance, v2 media
(processed asynchronously: 206 until ready), statuses with Idempotency-Key, rate-limit
headers and Mastodon's error bodies. Standard library only; binds 127.0.0.1.

    python3 tests/mastodon/server.py [--port N]

prints one line, {"url": "http://127.0.0.1:<port>"}, and exits when stdin closes.
Test-only endpoints live under /_test/ (see README.md beside this file).
"""

import html
import json
import re
import secrets
import sys
import threading
import time
from datetime import datetime, timedelta, timezone
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

LOCK = threading.Lock()
STATE = {
    "tokens": {},        # token -> username (revoked tokens are removed)
    "accounts": {},      # username -> account id
    "statuses": [],      # every status created, with test-visible extras
    "media": {},         # id -> {"owner", "description", "polls", "type"}
    "idempotency": {},   # (token, key) -> (status id, time)
    "fail": [],          # statuses to answer the next POST /api/v1/statuses with
    "requests": {},      # path -> count
    "config": {"max_characters": 500, "max_media_attachments": 4},
    "next_id": 110000000000000000,
}
MIMES = ["image/jpeg", "image/png", "image/webp", "image/gif"]
URL_RE = re.compile(r"https?://\S+")


def now_iso():
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def next_id():
    STATE["next_id"] += 1
    return str(STATE["next_id"])


def text_length(text):
    # Mastodon counts every URL as 23 characters.
    return len(URL_RE.sub("x" * 23, text))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # method, path and status only; never headers
        sys.stderr.write("mastodon: %s\n" % (fmt % args))

    @property
    def base(self):
        return "http://%s:%d" % self.server.server_address[:2]

    def reply(self, status, body, headers=None, content_type="application/json"):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, message, headers=None):
        self.reply(status, {"error": message}, headers)

    def rate_headers(self, remaining=299):
        reset = (datetime.now(timezone.utc) + timedelta(minutes=5)).isoformat().replace("+00:00", "Z")
        return {"X-RateLimit-Limit": "300", "X-RateLimit-Remaining": str(remaining), "X-RateLimit-Reset": reset}

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def params(self, raw):
        ctype = self.headers.get("Content-Type", "")
        if "application/json" in ctype:
            return json.loads(raw or b"{}")
        if "application/x-www-form-urlencoded" in ctype:
            q = parse_qs(raw.decode())
            out = {k.rstrip("[]"): (v if k.endswith("[]") else v[0]) for k, v in q.items()}
            return out
        return {}

    def user(self):
        auth = self.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else None
        with LOCK:
            return token, STATE["tokens"].get(token)

    def account(self, username):
        return {
            "id": STATE["accounts"][username],
            "username": username,
            "acct": username,
            "display_name": username.capitalize(),
            "url": "%s/@%s" % (self.base, username),
            "created_at": "2026-01-01T00:00:00.000Z",
        }

    def media_entity(self, mid, m):
        ready = m["polls"] > 0
        return {"id": mid, "type": "image", "url": ("%s/media/%s" % (self.base, mid)) if ready else None,
                "preview_url": None, "description": m["description"]}

    def status_entity(self, s):
        return {
            "id": s["id"], "uri": "%s/users/%s/statuses/%s" % (self.base, s["account"], s["id"]),
            "url": "%s/@%s/%s" % (self.base, s["account"], s["id"]), "created_at": s["created_at"],
            "content": "<p>%s</p>" % html.escape(s["text"]), "visibility": s["visibility"], "language": s["language"],
            "spoiler_text": s["spoiler_text"], "sensitive": s["sensitive"],
            "media_attachments": [self.media_entity(m, STATE["media"][m]) for m in s["media_ids"]],
            "account": self.account(s["account"]),
        }

    def route(self, method):
        url = urlparse(self.path)
        path = url.path
        with LOCK:
            STATE["requests"][path] = STATE["requests"].get(path, 0) + 1
        raw = self.body()
        try:
            if path.startswith("/_test/"):
                return self.test_only(method, path, url, raw)
            if path.startswith("/@"):
                return self.permalink(path)
            if method == "GET" and path == "/api/v2/instance":
                return self.instance()
            token, user = self.user()
            if user is None:
                return self.error(401, "The access token is invalid")
            if method == "GET" and path == "/api/v1/accounts/verify_credentials":
                return self.reply(200, self.account(user), self.rate_headers())
            if method == "POST" and path == "/api/v2/media":
                return self.upload(user, raw)
            m = re.fullmatch(r"/api/v1/media/(\d+)", path)
            if method == "GET" and m:
                return self.poll_media(user, m.group(1))
            if method == "POST" and path == "/api/v1/statuses":
                return self.create_status(token, user, self.params(raw))
            m = re.fullmatch(r"/api/v1/statuses/(\d+)", path)
            if m and method in ("GET", "DELETE"):
                return self.one_status(method, user, m.group(1))
            return self.error(404, "Record not found")
        except json.JSONDecodeError as e:
            return self.error(400, "Invalid JSON: %s" % e)

    def instance(self):
        c = STATE["config"]
        self.reply(200, {
            "domain": "127.0.0.1", "title": "Test instance", "version": "4.3.0",
            "configuration": {
                "statuses": {"max_characters": c["max_characters"], "max_media_attachments": c["max_media_attachments"],
                             "characters_reserved_per_url": 23},
                "media_attachments": {"supported_mime_types": MIMES, "image_size_limit": 16777216},
            },
        })

    def upload(self, user, raw):
        msg = BytesParser(policy=HTTP).parsebytes(
            b"Content-Type: " + self.headers.get("Content-Type", "").encode() + b"\r\n\r\n" + raw)
        parts = {p.get_param("name", header="content-disposition"): p for p in msg.iter_parts()} if msg.is_multipart() else {}
        f = parts.get("file")
        if f is None:
            return self.error(422, "Validation failed: File can't be blank")
        if f.get_content_type() not in MIMES:
            return self.error(422, "Validation failed: File content type is invalid")
        desc = parts["description"].get_content().strip() if "description" in parts else None
        with LOCK:
            mid = next_id()
            STATE["media"][mid] = {"owner": user, "description": desc, "polls": 0, "bytes": len(f.get_payload(decode=True) or b"")}
            entity = self.media_entity(mid, STATE["media"][mid])
        self.reply(202, entity, self.rate_headers())

    def poll_media(self, user, mid):
        with LOCK:
            m = STATE["media"].get(mid)
            if m is None or m["owner"] != user:
                return self.error(404, "Record not found")
            first = m["polls"] == 0
            m["polls"] += 1
            entity = self.media_entity(mid, m) if not first else dict(self.media_entity(mid, m), url=None)
        self.reply(206 if first else 200, entity, self.rate_headers())

    def create_status(self, token, user, p):
        key = self.headers.get("Idempotency-Key")
        with LOCK:
            if STATE["fail"]:
                status = STATE["fail"].pop(0)
                if status == 429:
                    reset = (datetime.now(timezone.utc) + timedelta(seconds=1)).isoformat().replace("+00:00", "Z")
                    return self.error(429, "Too many requests",
                                      {"X-RateLimit-Limit": "300", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset, "Retry-After": "1"})
                return self.error(status, "Something went wrong on our end")
            if key and (token, key) in STATE["idempotency"]:
                sid, at = STATE["idempotency"][(token, key)]
                if time.time() - at < 3600:
                    s = next(x for x in STATE["statuses"] if x["id"] == sid)
                    return self.reply(200, self.status_entity(s), self.rate_headers())
            text = p.get("status") or ""
            media_ids = p.get("media_ids") or []
            if isinstance(media_ids, str):
                media_ids = [media_ids]
            c = STATE["config"]
            if not text and not media_ids:
                return self.error(422, "Validation failed: Text can't be blank")
            if text_length(text) > c["max_characters"]:
                return self.error(422, "Validation failed: Text character limit of %d exceeded" % c["max_characters"])
            if len(media_ids) > c["max_media_attachments"]:
                return self.error(422, "Validation failed: Media attachments limit exceeded")
            for mid in media_ids:
                if STATE["media"].get(str(mid), {}).get("owner") != user:
                    return self.error(422, "Validation failed: Media attachment not found")
            s = {"id": next_id(), "account": user, "text": text, "created_at": now_iso(), "idempotency_key": key,
                 "media_ids": [str(m) for m in media_ids], "visibility": p.get("visibility", "public"),
                 "language": p.get("language"), "spoiler_text": p.get("spoiler_text", ""), "sensitive": bool(p.get("sensitive", False))}
            STATE["statuses"].append(s)
            if key:
                STATE["idempotency"][(token, key)] = (s["id"], time.time())
            entity = self.status_entity(s)
        self.reply(200, entity, self.rate_headers())

    def one_status(self, method, user, sid):
        with LOCK:
            s = next((x for x in STATE["statuses"] if x["id"] == sid), None)
            if s is None:
                return self.error(404, "Record not found")
            if method == "DELETE":
                if s["account"] != user:
                    return self.error(404, "Record not found")
                STATE["statuses"].remove(s)
            entity = self.status_entity(s)
        self.reply(200, entity, self.rate_headers())

    def permalink(self, path):
        m = re.fullmatch(r"/@([^/]+)/(\d+)", path)
        with LOCK:
            s = next((x for x in STATE["statuses"] if m and x["id"] == m.group(2) and x["account"] == m.group(1)), None)
        if s is None:
            return self.reply(404, "<h1>Not found</h1>", content_type="text/html")
        self.reply(200, "<html><body><article>%s</article></body></html>" % html.escape(s["text"]), content_type="text/html")

    def test_only(self, method, path, url, raw):
        p = json.loads(raw or b"{}") if raw else {}
        with LOCK:
            if path == "/_test/accounts" and method == "POST":
                name = p["username"]
                STATE["accounts"].setdefault(name, next_id())
                token = secrets.token_urlsafe(24)
                STATE["tokens"][token] = name
                return self.reply(200, {"access_token": token, "acct": name, "id": STATE["accounts"][name]})
            if path == "/_test/revoke" and method == "POST":
                STATE["tokens"].pop(p.get("access_token"), None)
                return self.reply(200, {})
            if path == "/_test/config" and method == "POST":
                STATE["config"].update({k: int(v) for k, v in p.items() if k in STATE["config"]})
                return self.reply(200, STATE["config"])
            if path == "/_test/fail" and method == "POST":
                STATE["fail"].extend([int(p.get("status", 503))] * int(p.get("count", 1)))
                return self.reply(200, {})
            if path == "/_test/statuses":
                return self.reply(200, [dict(s) for s in STATE["statuses"]])
            if path == "/_test/requests":
                q = parse_qs(url.query).get("path", [""])[0]
                return self.reply(200, {"count": STATE["requests"].get(q, 0)})
        return self.error(404, "Record not found")

    def do_GET(self):
        self.route("GET")

    def do_POST(self):
        self.route("POST")

    def do_DELETE(self):
        self.route("DELETE")


def main():
    port = 0
    if "--port" in sys.argv:
        port = int(sys.argv[sys.argv.index("--port") + 1])
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(json.dumps({"url": "http://127.0.0.1:%d" % server.server_address[1]}), flush=True)
    # Stop when the parent goes away (its end of our stdin closes).
    try:
        while sys.stdin.read(1024):
            pass
    except KeyboardInterrupt:
        pass
    server.shutdown()


if __name__ == "__main__":
    main()
