"""Sends identify, track (userId only; a UUID anonymousId; a non-UUID anonymousId), page, screen,
group and alias through segment-analytics-python (from PyPI), with its defaults and only the
host set, and prints what it sent as JSON: each call's values, the SDK's own messageId and the
time of the call. Driven by tests/interop/sdks.rs.

usage: python send.py <base url> <write key>
"""
import json
import sys
import time

import segment.analytics as analytics

host, write_key = sys.argv[1], sys.argv[2]
analytics.write_key = write_key
analytics.host = host
failures = []
analytics.on_error = lambda e, batch: failures.append(str(e))
p = "python"
calls = [
    ("identify", dict(user_id=f"{p}-user", traits={"plan": "pro", "email": "ada@example.com"})),
    ("track", dict(user_id=f"{p}-user", event="Order Completed", properties={"total": 42.5, "currency": "EUR"})),
    ("track", dict(anonymous_id="6f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e5f", event="Signed Up", properties={"plan": "free"})),
    ("track", dict(anonymous_id=f"{p}-anon-cookie-123", event="Viewed Item", properties={"sku": "A-1"})),
    ("page", dict(user_id=f"{p}-user", name="Pricing", category="Docs", properties={
        "url": "https://shop.example/pricing?x=1", "path": "/pricing", "title": "Pricing",
        "referrer": "https://search.example/"})),
    ("screen", dict(user_id=f"{p}-user", name="Home", properties={"variant": "dark"})),
    ("group", dict(user_id=f"{p}-user", group_id=f"{p}-acme", traits={"name": "Acme", "seats": 12})),
    ("alias", dict(user_id=f"{p}-user", previous_id=f"{p}-anon-cookie-123")),
]
camel = {"user_id": "userId", "anonymous_id": "anonymousId", "group_id": "groupId", "previous_id": "previousId"}
sent = []
for kind, kwargs in calls:
    at = int(time.time() * 1000)
    ok, msg = getattr(analytics, kind)(**kwargs)
    if not ok:
        failures.append(f"{kind}: not queued")
    params = {camel.get(k, k): v for k, v in kwargs.items()}
    sent.append({"type": kind, "params": params, "at": at, "messageId": msg["messageId"], "timestamp": msg["timestamp"]})
analytics.flush()
analytics.shutdown()
print(json.dumps({"sent": sent, "failures": failures}))
