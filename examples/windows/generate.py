#!/usr/bin/env python3
"""Writes clicks.jsonl: out-of-order clicks of ten users, for examples/windows.

Click i happens at START + i * 250 ms; it is written up to 3 s out of order
(within the job's max_out_of_orderness of 5 s). Every 97th line is a click
replayed a minute late: its window has fired by then, so window-count sends
it to the `late` port. Deterministic (seeded), so the output is the same on
every run.
"""
import json
import random
from datetime import datetime, timezone

START = 1_767_225_600_000  # 2026-01-01T00:00:00Z
rng = random.Random(15)
clicks = []
for i in range(2000):
    ts = START + i * 250
    clicks.append((ts + rng.randrange(0, 3000), ts, f"u{rng.randrange(10)}"))
clicks.sort()  # by arrival: each click arrives up to 3 s after it happened

with open("clicks.jsonl", "w") as f:
    for n, (_, ts, user) in enumerate(clicks):
        if n % 97 == 96:
            late = ts - 60_000
            # RFC 3339 works as well as milliseconds.
            when = datetime.fromtimestamp(late / 1000, timezone.utc)
            stamp = when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
            f.write(json.dumps({"user": user, "page": "/late", "ts": stamp}) + "\n")
        f.write(json.dumps({"user": user, "page": f"/p{ts % 7}", "ts": ts}) + "\n")
