#!/usr/bin/env python3
"""A small Mastodon-compatible server for the end-to-end tests, written from the published API
documentation (docs.joinmastodon.org) and checked against Mastodon's own behaviour where the
docs are silent. Standard library only; state lives in memory; binds 127.0.0.1 only.

    python3 tests/mastodon/server.py [--port N]

Prints one line, {"url": "http://127.0.0.1:<port>"}, then serves until stdin reaches EOF or
SIGTERM. Test-only endpoints live under /_test/ (see README.md beside this file).
"""

import argparse
import html
import json
import os
import re
import secrets
import signal
import sys
import threading
import time
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

RATE_LIMIT, RATE_PERIOD = 300, 300  # per token per 5 minutes, as the docs' rate-limits page says
IDEMPOTENCY_TTL = 3600              # Mastodon keeps Idempotency-Key entries for one hour
MIME_TYPES = ["image/jpeg", "image/png", "image/webp", "image/gif"]
IMAGE_SIZE_LIMIT = 16 * 1024 * 1024
DESCRIPTION_LIMIT = 1500
URL_CHARS = 23
VISIBILITIES = ("public", "unlisted", "private", "direct")
MAX_BODY = 64 * 1024 * 1024
# ISO 639-1: Mastodon keeps `language` only when ISO_639.find knows it, else it stores null.
ISO_639_1 = set("""aa ab ae af ak am an ar as av ay az ba be bg bh bi bm bn bo br bs ca ce ch co
cr cs cu cv cy da de dv dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho
hr ht hu hy hz ia id ie ig ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku kv kw ky la
lb lg li ln lo lt lu lv mg mh mi mk ml mn mr ms mt my na nb nd ne ng nl nn no nr nv ny oc oj om or
os pa pi pl ps pt qu rm rn ro ru rw sa sc sd se sg si sk sl sm sn so sq sr ss st su sv sw ta te tg
th ti tk tl tn to tr ts tt tw ty ug uk ur uz ve vi vo wa wo xh yi yo za zh zu""".split())
FAILURE_BODIES = {500: "Internal server error", 502: "Bad gateway", 504: "Gateway timeout",
                  503: "There was a temporary problem serving your request, please try again"}
MAGIC = [(b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"), (b"GIF87a", "image/gif"),
         (b"GIF89a", "image/gif")]

# Approximations of twitter-text's URL pattern and Mastodon's hashtag and mention patterns.
URL_PATTERN = (r"(?<![\w@/])(?P<scheme>https?://(?:www\.)?)(?P<rest>(?:[\w-]+\.)+[\w-]+(?::\d+)?"
               r"(?:[/?#](?:[^\s<>\"]*[^\s<>\".,;:!?')\]])?)?)")
TAG_PATTERN = r"(?<![=/)\w&])#(?P<tag>\w*[^\W\d]\w*)"
URL_RE = re.compile(URL_PATTERN, re.I)
TOKEN_RE = re.compile(URL_PATTERN + "|" + TAG_PATTERN, re.I)
MENTION_RE = re.compile(r"(?<![=/\w])@([a-z0-9_]+(?:[a-z0-9_.-]+[a-z0-9_]+)?)(?:@[\w.-]+\w)?", re.I)


class BadRequest(Exception):
    pass


class State:
    def __init__(self):
        self.lock = threading.Lock()
        self.last_id = 0
        self.accounts = {}     # username -> {"id", "username", "display_name", "created_at"}
        self.tokens = {}       # token -> {"username", "revoked"}
        self.media = {}        # id -> {"owner", "mime", "data", "description", "polls", "status_id"}
        self.statuses = {}     # id -> record; deleted ones stay (flagged) for /_test/statuses
        self.idempotency = {}  # (account id, key) -> (status id, expiry)
        self.windows = {}      # token -> (window start, requests in it)
        self.failures = []     # statuses the next POST /api/v1/statuses calls answer with
        self.requests = {}     # path -> requests seen
        self.config = {"max_characters": 500, "max_media_attachments": 4, "processing_polls": 1}

    def next_id(self):
        # Mastodon ids are snowflakes (milliseconds << 16 | sequence): increasing strings.
        self.last_id = max(self.last_id + 1, int(time.time() * 1000) << 16)
        return str(self.last_id)


S = State()


def iso(t, digits=3):
    # Entities use milliseconds; X-RateLimit-Reset uses Ruby's iso8601(6).
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:19 + 1 + digits] + "Z"


def esc(s):
    # Rails' html_escape, which Mastodon's formatter uses.
    return html.escape(s, quote=False).replace('"', "&quot;").replace("'", "&#39;")


def countable_length(text, spoiler_text):
    # StatusLengthValidator: URLs count 23, remote mentions count without their domain, and the
    # content warning shares the limit. (Mastodon counts grapheme clusters; code points here.)
    return len(spoiler_text + MENTION_RE.sub(r"@\1", URL_RE.sub("x" * URL_CHARS, text)))


def cast_bool(v):
    # ActiveModel::Type::Boolean: blank is nil, a few spellings are false, anything else true.
    if v is None or isinstance(v, bool):
        return v
    s = str(v).strip()
    return None if s == "" else s.lower() not in ("false", "0", "f", "off")


def format_content(text, base):
    """Mastodon's TextFormatter + simple_format: escaped text, links and hashtags as anchors,
    paragraphs on blank lines, <br /> on single newlines, no newline characters left."""
    if not text.strip():
        return "", []
    tags = []

    def line(raw):
        out, pos = [], 0
        for m in TOKEN_RE.finditer(raw):
            out.append(esc(raw[pos:m.start()]))
            pos = m.end()
            if m.group("tag"):
                tag = m.group("tag")
                tags.append(tag.lower())
                out.append(f'<a href="{base}/tags/{esc(tag.lower())}" class="mention hashtag" rel="tag">'
                           f'#<span>{esc(tag)}</span></a>')
            else:
                shown, hidden = m.group("rest")[:30], m.group("rest")[30:]
                out.append(f'<a href="{esc(m.group(0))}" target="_blank" rel="nofollow noopener" translate="no">'
                           f'<span class="invisible">{esc(m.group("scheme"))}</span>'
                           f'<span class="{"ellipsis" if hidden else ""}">{esc(shown)}</span>'
                           f'<span class="invisible">{esc(hidden)}</span></a>')
        out.append(esc(raw[pos:]))
        return "".join(out)

    paragraphs = re.split(r"\n\n+", text.replace("\r\n", "\n").replace("\r", "\n"))
    body = "".join("<p>%s</p>" % "<br />".join(line(x) for x in p.split("\n")) for p in paragraphs)
    return body, sorted(set(tags))


def parse_multipart(content_type, body):
    """{name: {"data", "filename", "type"}} from a multipart/form-data body."""
    m = re.search(r'boundary=(?:"([^"]+)"|([^;\s]+))', content_type)
    if not content_type.lower().startswith("multipart/form-data") or not m:
        return {}
    parts = {}
    for chunk in body.split(b"--" + (m.group(1) or m.group(2)).encode())[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, data = chunk.partition(b"\r\n\r\n")
        data = data[:-2] if data.endswith(b"\r\n") else data
        headers = dict((k.strip().lower(), v.strip()) for k, _, v in
                       (ln.partition(":") for ln in head.decode("utf-8", "replace").split("\r\n")) if k)
        disposition = headers.get("content-disposition", "")
        name, filename = re.search(r'\bname="([^"]*)"', disposition), re.search(r'filename="([^"]*)"', disposition)
        if name:
            ctype = headers.get("content-type", "text/plain").split(";")[0].strip().lower()
            parts[name.group(1)] = {"data": data, "filename": filename and filename.group(1), "type": ctype}
    return parts


def sniff(data):
    # Mastodon trusts the file's bytes, not the declared type.
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return next((mime for magic, mime in MAGIC if data.startswith(magic)), None)


def json_object(raw, message):
    try:
        body = json.loads(raw)
    except ValueError:
        raise BadRequest(message)
    if not isinstance(body, dict):
        raise BadRequest(message)
    return body


def rails_params(pairs):
    # `name[]` collects a list, a plain name keeps its last value.
    return {k[:-2] if k.endswith("[]") else k: (v if k.endswith("[]") else v[-1]) for k, v in pairs.items()}


# Entities (call with S.lock held).

def account_entity(base, username, me=False):
    a = S.accounts[username]
    own = [s for s in S.statuses.values() if s["account"] == username and not s["deleted"]]
    e = {"id": a["id"], "username": username, "acct": username, "display_name": a["display_name"],
         "locked": False, "bot": False, "discoverable": True, "group": False,
         "created_at": a["created_at"], "note": "", "url": f"{base}/@{username}", "uri": f"{base}/users/{username}",
         "avatar": f"{base}/avatars/original/missing.png", "avatar_static": f"{base}/avatars/original/missing.png",
         "header": f"{base}/headers/original/missing.png", "header_static": f"{base}/headers/original/missing.png",
         "followers_count": 0, "following_count": 0, "statuses_count": len(own),
         "last_status_at": iso(own[-1]["created_at"])[:10] if own else None, "emojis": [], "fields": []}
    if me:
        e["source"] = {"privacy": "public", "sensitive": False, "language": None, "note": "", "fields": [],
                       "follow_requests_count": 0}
    return e


def media_processed(m):
    return m["polls"] >= S.config["processing_polls"]


def media_entity(base, mid, m, ready=None):
    ready = media_processed(m) if ready is None else ready
    url = f"{base}/media/{mid}" if ready else None
    return {"id": mid, "type": "image", "url": url, "preview_url": url, "remote_url": None,
            "preview_remote_url": None, "text_url": None, "meta": {}, "description": m["description"],
            "blurhash": None}


def status_entity(base, s):
    content, tags = format_content(s["text"], base)
    return {"id": s["id"], "created_at": iso(s["created_at"]), "in_reply_to_id": None,
            "in_reply_to_account_id": None, "sensitive": s["sensitive"], "spoiler_text": s["spoiler_text"],
            "visibility": s["visibility"], "language": s["language"],
            "uri": f"{base}/users/{s['account']}/statuses/{s['id']}", "url": f"{base}/@{s['account']}/{s['id']}",
            "replies_count": 0, "reblogs_count": 0, "favourites_count": 0, "edited_at": None,
            "favourited": False, "reblogged": False, "muted": False, "bookmarked": False, "pinned": False,
            "content": content, "reblog": None, "account": account_entity(base, s["account"]),
            "media_attachments": [media_entity(base, mid, S.media[mid]) for mid in s["media_ids"]],
            "mentions": [], "tags": [{"name": t, "url": f"{base}/tags/{t}"} for t in tags],
            "emojis": [], "card": None, "poll": None}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_request(self, code="-", size="-"):
        # Method, path and status only: no query string, no headers, so no tokens.
        sys.stderr.write(f"mastodon: {self.command} {urlsplit(self.path).path} {code}\n")

    def send(self, status, body, headers=None, content_type="application/json; charset=utf-8"):
        data = body if isinstance(body, bytes) else (
            body.encode() if isinstance(body, str) else json.dumps(body, ensure_ascii=False).encode())
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in {**self.extra, **(headers or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, message, headers=None):
        self.send(status, {"error": message}, headers)

    def do_GET(self):
        url = urlsplit(self.path)
        self.base = "http://127.0.0.1:%d" % self.server.server_address[1]
        self.extra = {}
        length = self.headers.get("Content-Length") or "0"
        if not length.isdigit() or int(length) > MAX_BODY:
            self.close_connection = True
            return self.error(400, "Bad Content-Length")
        self.raw = self.rfile.read(int(length))
        query = parse_qs(url.query, keep_blank_values=True)
        if not url.path.startswith("/_test/"):
            with S.lock:
                S.requests[url.path] = S.requests.get(url.path, 0) + 1
        try:
            if url.path.startswith("/_test/"):
                return self.test_only(url.path, query)
            if url.path.startswith("/api/"):
                return self.api(url.path, query)
            return self.web(url.path)
        except BadRequest as e:
            return self.error(400, str(e))

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    def params(self, query):
        """Rails-style params: the query string, then a JSON or form body."""
        p = rails_params(query)
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if ctype == "application/json" and self.raw.strip():
            p.update(json_object(self.raw, "Error occurred while parsing request parameters"))
        elif ctype == "application/x-www-form-urlencoded":
            p.update(rails_params(parse_qs(self.raw.decode("utf-8", "replace"), keep_blank_values=True)))
        return p

    # --- /api ---

    def api(self, path, query):
        method = self.command
        if method == "GET" and path == "/api/v2/instance":
            return self.send(200, self.instance())
        if method == "POST" and path == "/api/v1/statuses":
            with S.lock:  # injected failures stand for a proxy or throttle in front of the app
                injected = S.failures.pop(0) if S.failures else None
            if injected == 429:
                reset = iso(time.time() + 1, 6)
                return self.error(429, "Too many requests", {"X-RateLimit-Limit": str(RATE_LIMIT),
                                  "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset, "Retry-After": "1"})
            if injected:
                return self.error(injected, FAILURE_BODIES.get(injected, "Something went wrong"))
        user, token = self.authenticate()
        if user is None or not self.throttle(token):
            return
        if method == "GET" and path == "/api/v1/accounts/verify_credentials":
            with S.lock:
                me = account_entity(self.base, user, me=True)
            return self.send(200, me)
        if method == "POST" and path in ("/api/v2/media", "/api/v1/media"):
            return self.upload(user, v2=path.startswith("/api/v2"))
        if method == "POST" and path == "/api/v1/statuses":
            return self.send(*self.create_status(user, self.params(query)))
        m = re.fullmatch(r"/api/v1/media/(\d+)", path)
        if m and method == "GET":
            return self.send(*self.show_media(user, m.group(1)))
        m = re.fullmatch(r"/api/v1/statuses/(\d+)", path)
        if m and method in ("GET", "DELETE"):
            return self.send(*self.one_status(user, m.group(1), delete=method == "DELETE"))
        return self.error(404, "Record not found")

    def authenticate(self):
        auth = self.headers.get("Authorization", "")
        token = auth[7:].strip() if auth[:7].lower() == "bearer " else ""
        with S.lock:
            t = S.tokens.get(token) if token else None
        if t and not t["revoked"]:
            return t["username"], token
        # Doorkeeper's descriptions, which Mastodon renders as {"error": ...}.
        msg = "The access token was revoked" if t else "The access token is invalid"
        self.error(401, msg, {"WWW-Authenticate":
                              f'Bearer realm="Doorkeeper", error="invalid_token", error_description="{msg}"'})
        return None, None

    def throttle(self, token):
        # Fixed 5-minute windows per token; the reset is the end of the window (rack-attack).
        now = time.time()
        start = int(now) // RATE_PERIOD * RATE_PERIOD
        with S.lock:
            w_start, count = S.windows.get(token, (start, 0))
            count = (count if w_start == start else 0) + 1
            S.windows[token] = (start, count)
        self.extra = {"X-RateLimit-Limit": str(RATE_LIMIT), "X-RateLimit-Remaining": str(max(RATE_LIMIT - count, 0)),
                      "X-RateLimit-Reset": iso(now + RATE_PERIOD - int(now) % RATE_PERIOD, 6)}
        if count > RATE_LIMIT:
            self.error(429, "Too many requests")
            return False
        return True

    def instance(self):
        with S.lock:
            c = dict(S.config)
            users = len(S.accounts)
        host = self.base.split("//", 1)[1]
        return {
            "domain": host, "title": "Mastodon test server", "version": "4.3.0", "languages": ["en"],
            "source_url": "https://github.com/mastodon/mastodon", "description": "An in-memory server for tests.",
            "usage": {"users": {"active_month": users}}, "api_versions": {"mastodon": 2},
            "configuration": {
                "urls": {"streaming": f"ws://{host}"},
                "statuses": {"max_characters": c["max_characters"], "max_media_attachments": c["max_media_attachments"],
                             "characters_reserved_per_url": URL_CHARS},
                "media_attachments": {"supported_mime_types": MIME_TYPES, "description_limit": DESCRIPTION_LIMIT,
                                      "image_size_limit": IMAGE_SIZE_LIMIT, "image_matrix_limit": 33177600},
            },
            "registrations": {"enabled": False, "approval_required": False, "message": None}, "rules": [],
        }

    def upload(self, user, v2):
        parts = parse_multipart(self.headers.get("Content-Type", ""), self.raw)
        f = parts.get("file")
        if not f or not f["data"]:
            return self.error(422, "Validation failed: File can't be blank")
        mime = sniff(f["data"]) or f["type"]
        if mime not in MIME_TYPES:
            return self.error(422, "Validation failed: File content type is invalid")
        if len(f["data"]) > IMAGE_SIZE_LIMIT:
            return self.error(422, "Validation failed: File file size must be less than 16 MB")
        desc = parts["description"]["data"].decode("utf-8", "replace") if "description" in parts else ""
        if len(desc) > DESCRIPTION_LIMIT:
            return self.error(422, f"Validation failed: Description is too long (maximum is {DESCRIPTION_LIMIT} characters)")
        with S.lock:
            mid = S.next_id()
            m = S.media[mid] = {"owner": user, "mime": mime, "data": f["data"], "description": desc or None,
                                "polls": 0, "status_id": None}
            ready = media_processed(m)
            entity = media_entity(self.base, mid, m)
        # v2 answers 202 while the file still processes; v1 processes before answering.
        self.send(202 if v2 and not ready else 200, entity)

    def show_media(self, user, mid):
        with S.lock:
            m = S.media.get(mid)
            # Only the owner's media not yet attached to a status (set_media_attachment).
            if not m or m["owner"] != user or m["status_id"]:
                return 404, {"error": "Record not found"}
            ready = media_processed(m)
            m["polls"] += 1
            return (200 if ready else 206), media_entity(self.base, mid, m, ready)

    def create_status(self, user, p):
        key = (self.headers.get("Idempotency-Key") or "").strip()
        now = time.time()
        with S.lock:
            acct_id = S.accounts[user]["id"]
            # PostStatusService: a key seen from this account within the hour returns that status.
            hit = S.idempotency.get((acct_id, key)) if key else None
            if hit and hit[1] > now:
                s = S.statuses.get(hit[0])
                if not s or s["deleted"]:
                    return 404, {"error": "Record not found"}
                return 200, status_entity(self.base, s)
            c = S.config
            text = "" if p.get("status") is None else str(p.get("status"))
            spoiler = "" if p.get("spoiler_text") is None else str(p.get("spoiler_text"))
            ids = p.get("media_ids")
            ids = list(dict.fromkeys(str(i) for i in ids)) if isinstance(ids, list) else []  # non-lists are ignored
            if len(ids) > c["max_media_attachments"]:
                return 422, {"error": f"Cannot attach more than {c['max_media_attachments']} files"}
            missing = [i for i in ids if i not in S.media or S.media[i]["owner"] != user or S.media[i]["status_id"]]
            if missing:
                return 422, {"error": f"Media {', '.join(missing)} not found or already attached to another post"}
            if any(not media_processed(S.media[i]) for i in ids):
                return 422, {"error": "Cannot attach files that have not finished processing. Try again in a moment!"}
            visibility = p.get("visibility") or "public"
            if visibility not in VISIBILITIES:
                return 422, {"error": "Validation failed: Visibility is not included in the list"}
            if not text.strip() and not ids:
                return 422, {"error": "Validation failed: Text can't be blank"}
            if countable_length(text, spoiler) > c["max_characters"]:
                return 422, {"error": f"Validation failed: Text character limit of {c['max_characters']} exceeded"}
            language = p.get("language")
            language = language.strip().lower() if isinstance(language, str) else None
            s = {"id": S.next_id(), "account": user, "text": text, "spoiler_text": spoiler,
                 "visibility": visibility, "language": language if language in ISO_639_1 else None,
                 # A content warning makes the status sensitive.
                 "sensitive": bool(cast_bool(p.get("sensitive"))) or bool(spoiler),
                 "media_ids": ids, "idempotency_key": key or None, "created_at": now, "deleted": False}
            S.statuses[s["id"]] = s
            for i in ids:
                S.media[i]["status_id"] = s["id"]
            if key:
                S.idempotency[(acct_id, key)] = (s["id"], now + IDEMPOTENCY_TTL)
            return 200, status_entity(self.base, s)

    def one_status(self, user, sid, delete):
        with S.lock:
            s = S.statuses.get(sid)
            visible = s and not s["deleted"] and (s["visibility"] in ("public", "unlisted") or s["account"] == user)
            if not visible or (delete and s["account"] != user):
                return 404, {"error": "Record not found"}
            entity = status_entity(self.base, s)
            if delete:
                s["deleted"] = True
                entity["text"] = s["text"]  # the source, for delete-and-redraft
            return 200, entity

    # --- web pages ---

    def web(self, path):
        status, body, headers, ctype = self.page(path)
        self.send(status, body, headers, content_type=ctype)

    def page(self, path):
        html_page = "<!DOCTYPE html><html><body>%s</body></html>"
        missing = 404, html_page % "<h1>The page you are looking for isn't here.</h1>", None, "text/html"
        with S.lock:
            m = re.fullmatch(r"/@([\w.-]+)/(\d+)", path) if self.command == "GET" else None
            s = S.statuses.get(m.group(2)) if m else None
            # Anonymous visitors see public and unlisted statuses only.
            if s and not s["deleted"] and s["account"] == m.group(1) and s["visibility"] in ("public", "unlisted"):
                cw = "<p class=\"spoiler\">%s</p>" % esc(s["spoiler_text"]) if s["spoiler_text"] else ""
                return 200, html_page % (f'<article class="status" data-id="{s["id"]}"><p class="author">'
                                         f'@{esc(s["account"])}</p>{cw}{format_content(s["text"], self.base)[0]}'
                                         '</article>'), None, "text/html; charset=utf-8"
            m = re.fullmatch(r"/media/(\d+)", path) if self.command == "GET" else None
            media = S.media.get(m.group(1)) if m else None
            if media and media_processed(media):
                return 200, media["data"], None, media["mime"]
        return missing

    # --- /_test ---

    def test_only(self, path, query):
        self.send(*self.test_action(self.command, path, query,
                                    json_object(self.raw, "the body must be a JSON object") if self.raw.strip() else {}))

    def test_action(self, method, path, query, body):
        with S.lock:
            if method == "POST" and path == "/_test/accounts":
                name = body.get("username")
                if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9_]{1,30}", name):
                    return 400, {"error": "username must be 1-30 letters, digits or underscores"}
                a = S.accounts.setdefault(name, {"id": S.next_id(), "username": name,
                                                 "display_name": str(body.get("display_name") or ""),
                                                 "created_at": iso(time.time() // 86400 * 86400)})
                token = secrets.token_urlsafe(32)
                S.tokens[token] = {"username": name, "revoked": False}
                return 200, {"access_token": token, "token_type": "Bearer", "scope": "read write",
                             "acct": name, "id": a["id"]}
            if method == "POST" and path == "/_test/revoke":
                t = S.tokens.get(body.get("access_token"))
                if t:
                    t["revoked"] = True
                return 200, {"revoked": bool(t)}
            if method == "POST" and path == "/_test/config":
                for k in S.config:
                    v = body.get(k)
                    if k in body and (not isinstance(v, int) or isinstance(v, bool) or v < 0):
                        return 400, {"error": f"{k} must be a non-negative integer"}
                S.config.update({k: body[k] for k in S.config if k in body})
                return 200, dict(S.config)
            if method == "POST" and path == "/_test/fail":
                count, status = body.get("count", 1), body.get("status", 503)
                if not isinstance(count, int) or not isinstance(status, int) or not 400 <= status <= 599:
                    return 400, {"error": "count must be an integer and status an HTTP error status"}
                S.failures.extend([status] * count)
                return 200, {"pending": list(S.failures)}
            if method == "GET" and path == "/_test/statuses":
                return 200, [{"id": s["id"], "account": s["account"], "content": format_content(s["text"], self.base)[0],
                              "text": s["text"], "idempotency_key": s["idempotency_key"], "media_ids": s["media_ids"],
                              "visibility": s["visibility"], "language": s["language"],
                              "spoiler_text": s["spoiler_text"], "sensitive": s["sensitive"],
                              "created_at": iso(s["created_at"]), "url": f"{self.base}/@{s['account']}/{s['id']}",
                              "deleted": s["deleted"]} for s in S.statuses.values()]
            if method == "GET" and path == "/_test/requests":
                p = query.get("path", [None])[-1]
                return 200, ({"path": p, "count": S.requests.get(p, 0)} if p else {"counts": dict(S.requests)})
        return 404, {"error": "Record not found"}


def main():
    ap = argparse.ArgumentParser(description="Mastodon-compatible test server (127.0.0.1 only)")
    ap.add_argument("--port", type=int, default=0, help="port to bind (default 0: a free one)")
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    server.daemon_threads = True
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())

    def watch_stdin():
        # The parent holds our stdin open; EOF means it has gone, so we go too.
        try:
            while os.read(sys.stdin.fileno(), 4096):
                pass
        finally:
            stop.set()

    threading.Thread(target=server.serve_forever, daemon=True).start()
    threading.Thread(target=watch_stdin, daemon=True).start()
    print(json.dumps({"url": "http://127.0.0.1:%d" % server.server_address[1]}), flush=True)
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    server.shutdown()
    server.server_close()


if __name__ == "__main__":
    main()
