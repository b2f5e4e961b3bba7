"""A webhook receiver for the tests (tests/interop/webhooks.rs): verifies every delivery with the
Standard Webhooks reference library (`standardwebhooks` from PyPI) and records what it got.

    webhook_receiver.py            listens on 127.0.0.1, a free port; prints {"port": N} first

One receiver serves many endpoints: a delivery to POST /hook/<name> is checked against the
secrets set for <name> and answered as <name>'s behaviour says. The test drives it over HTTP:

    PUT  /control/<name>   {"secrets": ["whsec_..", ..],     each delivery is verified with each
                            "status": 200,                  the answer (e.g. 500)
                            "okAfter": unix secs or null,   from then on 200
                            "delay": secs}                  sleep before answering (a slow one)
    GET  /log/<name>?since=N   the records from the N-th on: {"records": [...], "count": total}

A record: {"id", "type", "sequence", "subject", "checks": [verified with secret i], "verified"
(every check passed), "answered", "at" (unix secs, float), "timestamp" (webhook-timestamp)},
and with ?full=1 the raw "body" and "headers" too (so a test can replay a delivery tampered).
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

LOCK = threading.Lock()
CONFIG = {}  # name -> {"secrets": [...], "status": int, "okAfter": float|None, "delay": float}
LOGS = {}  # name -> [record]


def subject_of(kind, data):
    """The resource an event is about (the test checks the order per subject)."""
    if not isinstance(data, dict):
        return None
    for key in ("idea", "response", "contact", "erasure", "job"):
        value = data.get(key)
        if isinstance(value, dict) and "id" in value:
            if key == "idea" and kind.startswith(("vote.", "comment.")):
                break
            return value["id"]
    for key in ("ideaId", "webhookId"):
        if key in data:
            return data[key]
    return None


def check(secrets, body, headers):
    checks = []
    for secret in secrets:
        try:
            Webhook(secret).verify(body, headers)
            checks.append(True)
        except (WebhookVerificationError, ValueError):
            checks.append(False)
    return checks


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, payload):
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def read_body(self):
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length)

    def name(self, prefix):
        path = urlparse(self.path).path
        return path[len(prefix):] if path.startswith(prefix) else None

    def do_PUT(self):
        name = self.name("/control/")
        if not name:
            return self.answer(404, {"error": "no such path"})
        conf = json.loads(self.read_body() or b"{}")
        with LOCK:
            current = CONFIG.setdefault(name, {"secrets": [], "status": 200, "okAfter": None, "delay": 0})
            current.update(conf)
            LOGS.setdefault(name, [])
        return self.answer(200, current)

    def do_GET(self):
        name = self.name("/log/")
        if not name:
            return self.answer(404, {"error": "no such path"})
        query = parse_qs(urlparse(self.path).query)
        since = int(query.get("since", ["0"])[0])
        full = query.get("full", ["0"])[0] == "1"
        with LOCK:
            records = list(LOGS.get(name, []))
        out = []
        for r in records[since:]:
            r = dict(r)
            if not full:
                r.pop("body", None)
                r.pop("headers", None)
            out.append(r)
        return self.answer(200, {"records": out, "count": len(records)})

    def do_POST(self):
        name = self.name("/hook/")
        body = self.read_body()
        if not name:
            return self.answer(404, {"error": "no such path"})
        headers = {k.lower(): v for k, v in self.headers.items()}
        with LOCK:
            conf = dict(CONFIG.get(name) or {"secrets": [], "status": 200, "okAfter": None, "delay": 0})
        checks = check(conf["secrets"], body, headers)
        try:
            event = json.loads(body)
        except ValueError:
            event = {}
        if not isinstance(event, dict):
            event = {}
        status = conf["status"]
        if conf.get("okAfter") is not None and time.time() >= conf["okAfter"]:
            status = 200
        record = {
            "id": headers.get("webhook-id"),
            "bodyId": event.get("id"),
            "type": event.get("type"),
            "sequence": event.get("sequence"),
            "subject": subject_of(event.get("type") or "", event.get("data")),
            "actor": event.get("actor"),
            "data": event.get("data"),
            "checks": checks,
            "verified": bool(checks) and all(checks),
            "answered": status,
            "at": time.time(),
            "timestamp": headers.get("webhook-timestamp"),
            "userAgent": headers.get("user-agent"),
            "body": body.decode("utf-8", "replace"),
            "headers": headers,
        }
        if conf.get("delay"):
            time.sleep(conf["delay"])
            record["at"] = time.time()
        with LOCK:
            LOGS.setdefault(name, []).append(record)
        return self.answer(status, {"ok": status < 300})


def main():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    server.request_queue_size = 256
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
