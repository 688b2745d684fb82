#!/usr/bin/env python3
"""A Band agent with a classic exactly-once bug, for bandonce verify's tests.

It uses nothing but the standard library: it lists its rooms, polls each
room's /messages/next, claims what it is served, posts "echo: <text>" and
marks the message processed. It has no guard: when it is killed after its
reply was posted but before the processed mark, Band serves the message
again and it answers a second time. Everything else it does right: it
survives 429s, 5xx and dropped connections, and exits 0 on SIGTERM.

With --think=S each turn takes S seconds before its reply, as a turn that
waits on a model does.
"""

import json
import os
import re
import signal
import sys
import time
import urllib.error
import urllib.request

BASE = os.environ["BAND_BASE_URL"].rstrip("/")
KEY = os.environ["BAND_API_KEY"]
MARKER = re.compile(r"@\[\[[0-9A-Fa-f-]{36}\]\]\s*")
THINK = float(next((a.split("=", 1)[1] for a in sys.argv[1:] if a.startswith("--think=")), "0"))


def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(BASE + path, data=data, method=method)
    req.add_header("X-API-Key", KEY)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(req, timeout=10) as resp:
        raw = resp.read()
        return resp.status, (json.loads(raw) if raw else None)


def handle(room, msg):
    path = "/agent/chats/%s/messages/%s" % (room, msg["id"])
    call("POST", path + "/processing", {})
    time.sleep(THINK)
    text = MARKER.sub("", msg["content"]).strip()
    call("POST", "/agent/chats/%s/messages" % room, {
        "message": {"content": "echo: " + text, "mentions": [{"id": msg["sender_id"]}]},
    })
    call("POST", path + "/processed", {})


def main():
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        try:
            _, chats = call("GET", "/agent/chats")
            for room in [c["id"] for c in chats["data"]]:
                status, body = call("GET", "/agent/chats/%s/messages/next" % room)
                if status == 200 and body:
                    handle(room, body["data"])
        except (urllib.error.URLError, OSError, ValueError, KeyError):
            pass  # 429, 5xx, a dropped connection: poll again
        time.sleep(0.05)


if __name__ == "__main__":
    main()
