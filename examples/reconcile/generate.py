#!/usr/bin/env python3
"""Generates payments.csv and bank.csv for the reconcile example.

Usage: generate.py [ORDERS] [OUT_DIR]   (default 20 orders into this folder)

About 80% of orders appear on both sides with the same amount, 5% with a
different amount, 8% only in payments (A), 7% only at the bank (B). The bank
file lists orders in a different order than the payment system. Deterministic
(seeded), so the expected classification is reproducible.
"""
import os
import random
import sys

orders = int(sys.argv[1]) if len(sys.argv) > 1 else 20
out = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(__file__))
rng = random.Random(20261129)
a, b = [], []
for i in range(orders):
    no = f"ORD-{i:08d}"
    amount = f"{rng.randrange(100, 100000) / 100:.2f}"
    r = rng.random()
    if r < 0.80:
        a.append((no, amount, "alipay"))
        b.append((no, amount, "settled"))
    elif r < 0.85:
        a.append((no, amount, "wechat"))
        b.append((no, f"{float(amount) + rng.choice([-1, 1]) * rng.randrange(1, 500) / 100:.2f}", "settled"))
    elif r < 0.93:
        a.append((no, amount, "card"))
    else:
        b.append((no, amount, "settled"))
rng.shuffle(b)
for name, rows, third in (("payments.csv", a, "channel"), ("bank.csv", b, "state")):
    with open(os.path.join(out, name), "w") as f:
        f.write(f"order_no,amount,{third}\n")
        for row in rows:
            f.write(",".join(row) + "\n")
print(f"wrote {len(a)} payments and {len(b)} bank rows to {out}", file=sys.stderr)
