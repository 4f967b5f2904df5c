"""Read raw MIME messages with Python's `email` parser, as a mail client would.

tests/tests/emails.rs runs this with `["<raw message>", ...]` on stdin; it prints, per
message, its structure (`multipart/mixed[multipart/related[...],application/pdf]`) and each
leaf part's type, disposition, filename, Content-ID and decoded bytes (base64).
"""

import base64
import email
import email.policy
import json
import sys


def shape(part):
    if part.is_multipart():
        return part.get_content_type() + "[" + ",".join(shape(p) for p in part.iter_parts()) + "]"
    return part.get_content_type()


out = []
for raw in json.load(sys.stdin):
    msg = email.message_from_string(raw, policy=email.policy.default)
    parts = []
    for p in msg.walk():
        if p.is_multipart():
            continue
        parts.append(
            {
                "content_type": p.get_content_type(),
                "disposition": p.get_content_disposition(),
                "filename": p.get_filename(),
                "content_id": p.get("Content-ID"),
                "bytes": base64.b64encode(p.get_payload(decode=True) or b"").decode(),
            }
        )
    out.append({"shape": shape(msg), "parts": parts})
json.dump(out, sys.stdout)
