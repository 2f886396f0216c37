"""`reconcile` (对账) in Python: the same operator as plugins/reconcile (Rust).

Inputs `a` and `b` carry JSON objects with an `amount` (a number, or a string
holding one, as CSV sources produce). The key is the record key, else the
JSON field named by `key_field` (default "key"). For each key the operator
emits exactly one record, keyed by the key:

  {"key": k, "status": "MATCH" | "AMOUNT_MISMATCH" | "ONLY_A" | "ONLY_B",
   "a": <amount or null>, "b": <amount or null>}

as soon as both sides are present (MATCH when |a - b| <= tolerance). The first
record per key and side counts; later records for a side already seen are
ignored. Keys seen on one side only are emitted:

- without `timeout`, at `finish`; records of a key already emitted are
  ignored;
- with `timeout` (event time), once the watermark reaches the key's first
  timestamp + timeout (an event-time timer), with that time as timestamp (a
  MATCH gets the timestamp of the record that completed it). Every record
  needs a timestamp. A record of a key already emitted goes unchanged to
  output `late`. An emitted key is a tombstone until first timestamp + 2 x
  timeout, then dropped: a record of it after that starts a new key.

State layout (state version 1, shared with the Rust build): key `<k>` 0x00
`rc`, value JSON `{"a": <f64>, "b": <f64>, "done": true, "t": <first
timestamp>}` where an absent side, `done: false` and `t` (set only under
`timeout`) are omitted. Timers (under `timeout`): one event-time timer per
key, keyed by the key, at t + timeout while it waits, at t + 2 x timeout
while it is a tombstone.

Config (JSON, optional): {"tolerance": 0.0, "key_field": "key", "timeout": "30s"}.

World `operator-timers` (see `world` next to this file; flat batches and
timers). Build: scripts/build-polyglot.sh python (componentize-py).
"""

import json
import math
import re
import struct
from decimal import Decimal

import wit_world.exports
from componentize_py_types import Err
from wit_world.imports import emit, state, timers, types

SUFFIX = b"\x00rc"
PORT_A, PORT_B = 0, 1
OUT, LATE = 0, 1
EVENT_TIME = timers.TimeDomain.EVENT_TIME
I64_MAX = 2**63 - 1
# A flat span (wit/flat.wit): value offset and length, key offset and length,
# flags (bit 0 key, bit 1 timestamp), reserved, timestamp.
SPAN = struct.Struct("<IIIIIIq")
HAS_KEY, HAS_TIMESTAMP = 1, 2
SCAN_PAGE = 1000
# What Rust's `str::parse::<f64>` accepts (after `trim`).
FLOAT_RE = re.compile(
    r"[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|inf|infinity|nan)\Z", re.IGNORECASE
)
WHITESPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005"
    "\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"
)

_tolerance = 0.0
_key_field = "key"
# Milliseconds of event time a key waits for its other side; None waits
# until the end of input.
_timeout = None


def _fail(kind, message):
    return Err(kind(message))


def fmt_f64(x):
    """A float as serde_json writes it (shortest form that reads back): `20.0`,
    `0.00001`, `1e+16`, `1.5e-7`; null for NaN and infinities."""
    if not math.isfinite(x):
        return "null"
    # repr is the shortest text that reads back as x; re-lay it out as ryu does.
    sign, digits, exp = Decimal(repr(x)).normalize().as_tuple()
    sign = "-" if sign else ""
    digits = "".join(map(str, digits))
    if digits == "0":
        return sign + "0.0"
    n = len(digits)
    point = n + exp  # value = 0.<digits> * 10^point
    if 0 < point <= 16 and n <= point:
        return sign + digits + "0" * (point - n) + ".0"
    if 0 < point <= 16:
        return sign + digits[:point] + "." + digits[point:]
    if -5 < point <= 0:
        return sign + "0." + "0" * (-point) + digits
    m = digits if n == 1 else digits[0] + "." + digits[1:]
    e = point - 1
    return sign + m + ("e+" if e >= 0 else "e-") + str(abs(e))


def _json_value(v):
    """Compact JSON text of a parsed value, as serde_json writes it."""
    if isinstance(v, float):
        return fmt_f64(v)
    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, int):
        return str(v) if -(2**63) <= v < 2**64 else fmt_f64(float(v))
    if isinstance(v, dict):
        # serde_json's map is sorted by key.
        items = sorted(v.items(), key=lambda kv: kv[0].encode())
        return "{" + ",".join(_json_text(k) + ":" + _json_value(x) for k, x in items) + "}"
    if isinstance(v, list):
        return "[" + ",".join(_json_value(x) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)


def _json_text(s):
    return json.dumps(s, ensure_ascii=False)


def _no_constants(name):
    raise ValueError(f"invalid number {name}")


def _parse_int(text):
    # serde_json reads `-0` as the float -0.0.
    return -0.0 if text.lstrip("-").strip("0") == "" and text.startswith("-") else int(text)


def _parse_json(data):
    text = data.decode("utf-8")
    return json.loads(text, parse_constant=_no_constants, parse_int=_parse_int)


def _amount_of(v):
    if not isinstance(v, dict) or "amount" not in v:
        raise _fail(types.Error_InvalidInput, f"record has no `amount`: {_json_value(v)}")
    amount = v["amount"]
    if isinstance(amount, bool):
        result = None
    elif isinstance(amount, (int, float)):
        result = float(amount)
    elif isinstance(amount, str) and FLOAT_RE.match(amount.strip(WHITESPACE)):
        result = float(amount.strip(WHITESPACE))
    else:
        result = None
    if result is None:
        raise _fail(
            types.Error_InvalidInput, f"`amount` is not a number: {_json_value(amount)}"
        )
    return result


def _key_of(rec, v):
    if rec.key is not None:
        try:
            return rec.key.decode("utf-8")
        except UnicodeDecodeError:
            pass
    field = v.get(_key_field) if isinstance(v, dict) else None
    if isinstance(field, str):
        return field
    if field is not None:
        return _json_value(field)
    raise _fail(
        types.Error_InvalidInput,
        f"record has no key and no `{_key_field}` field (set the source's `key` or the "
        f"operator's `key_field`): {_json_value(v)}",
    )


def _sat(x):
    """x saturated to s64, as Rust's saturating_add (x is never below -2**63)."""
    return min(x, I64_MAX)


def parse_duration_ms(text):
    """Milliseconds of "250ms", "10s", "1.5s", "5m", "2h", "1d", as
    weir_sdk::window::parse_duration_ms reads them; None when it is no
    duration."""
    t = text.strip(WHITESPACE)
    split = next((i for i, c in enumerate(t) if not (c in "0123456789.")), len(t))
    number, unit = t[:split], t[split:].strip(WHITESPACE)
    units = {"ms": 1.0, "s": 1e3, "m": 60e3, "min": 60e3, "h": 3600e3, "d": 86_400e3}
    try:
        number = float(number)
    except ValueError:
        return None
    if unit not in units:
        return None
    x = number * units[unit]
    if not math.isfinite(x):
        return None
    # Rust's f64::round: halves away from zero (x >= 0 here).
    ms = math.floor(x) + (1 if x - math.floor(x) >= 0.5 else 0)
    return ms if 0 <= ms <= 9e15 else None


def _timeout_of(value):
    """`timeout` as weir_sdk::window::DurationMs reads it (null: none)."""
    if value is None:
        return None
    ms = None
    if isinstance(value, int) and not isinstance(value, bool) and -(2**63) <= value < 2**63:
        if value < 0:
            raise _fail(types.Error_InvalidConfig, f"`timeout`: {value} is a negative duration")
        ms = value
    elif isinstance(value, str):
        ms = parse_duration_ms(value)
    if ms is None:
        raise _fail(
            types.Error_InvalidConfig,
            f"`timeout`: {_json_value(value)} is not a duration; write e.g. \"250ms\", \"10s\", \"5m\", \"1h\"",
        )
    if ms == 0:
        raise _fail(
            types.Error_InvalidConfig,
            "`timeout` must be longer than 0ms (leave it out to wait for the end of input)",
        )
    return ms


def _tombstone(t):
    """A done key under `timeout`: only its first timestamp is kept."""
    return {"a": None, "b": None, "done": True, "t": t}


def _encode_pending(p):
    parts = []
    if p["a"] is not None:
        parts.append('"a":' + fmt_f64(p["a"]))
    if p["b"] is not None:
        parts.append('"b":' + fmt_f64(p["b"]))
    if p["done"]:
        parts.append('"done":true')
    if p["t"] is not None:
        parts.append('"t":%d' % p["t"])
    return ("{" + ",".join(parts) + "}").encode()


def _decode_pending(data):
    try:
        v = _parse_json(data)
        a, b, t = v.get("a"), v.get("b"), v.get("t")
        if not (t is None or (isinstance(t, int) and not isinstance(t, bool))):
            raise ValueError(f"`t` is not an integer: {_json_value(t)}")
        return {
            "a": None if a is None else float(a),
            "b": None if b is None else float(b),
            "done": bool(v.get("done", False)),
            "t": t,
        }
    except (ValueError, AttributeError, TypeError) as e:
        raise _fail(
            types.Error_IncompatibleState,
            f"state `rc` holds a value that does not decode: {e}",
        )


def _classified(key, p, timestamp):
    a, b = p["a"], p["b"]
    if a is not None and b is not None:
        status = "MATCH" if abs(a - b) <= _tolerance + 1e-9 else "AMOUNT_MISMATCH"
    elif a is not None:
        status = "ONLY_A"
    elif b is not None:
        status = "ONLY_B"
    else:
        return None
    value = '{"key":%s,"status":"%s","a":%s,"b":%s}' % (
        _json_text(key),
        status,
        "null" if a is None else fmt_f64(a),
        "null" if b is None else fmt_f64(b),
    )
    return types.Record(key=key.encode(), value=value.encode(), timestamp=timestamp)


class Lifecycle(wit_world.exports.Lifecycle):
    def describe(self):
        return types.OperatorInfo(
            name="reconcile",
            version="0.1.0",
            inputs=["a", "b"],
            outputs=["out", "late"],
            state_version=1,
        )

    def open(self, ctx):
        global _tolerance, _key_field, _timeout
        text = ctx.config if ctx.config.strip() else "{}"
        try:
            config = json.loads(text)
        except ValueError as e:
            raise _fail(types.Error_InvalidConfig, f"config is not JSON: {e}")
        if not isinstance(config, dict):
            raise _fail(types.Error_InvalidConfig, "config must be a JSON object")
        for field in config:
            if field not in ("tolerance", "key_field", "timeout"):
                raise _fail(
                    types.Error_InvalidConfig,
                    f"unknown field `{field}`, expected one of `tolerance`, `key_field`, `timeout`",
                )
        tolerance = config.get("tolerance", 0.0)
        if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)):
            raise _fail(types.Error_InvalidConfig, "`tolerance`: expected a number")
        key_field = config.get("key_field", "key")
        if not isinstance(key_field, str):
            raise _fail(types.Error_InvalidConfig, "`key_field`: expected a string")
        tolerance = float(tolerance)
        if math.isnan(tolerance) or tolerance < 0.0:
            raise _fail(
                types.Error_InvalidConfig,
                f"`tolerance` must be >= 0, got {fmt_f64(tolerance)}",
            )
        timeout = _timeout_of(config.get("timeout"))
        _tolerance, _key_field, _timeout = tolerance, key_field, timeout

    def process(self, port, batch):
        _process(port, batch)

    def on_checkpoint(self, checkpoint_id):
        pass

    def finish(self):
        _finish()


def _timestamp_of(rec, port, v):
    """The record's timestamp, which `timeout` needs; None without it."""
    if _timeout is None:
        return None
    if rec.timestamp is None:
        raise _fail(
            types.Error_InvalidInput,
            f"record on input `{'a' if port == PORT_A else 'b'}` has no timestamp, and "
            "`timeout` needs event time (set the source's `timestamp` to the field holding "
            f"the record's time, or drop `timeout`): {_json_value(v)}",
        )
    return rec.timestamp


def _records(data, spans):
    """The records of a flat batch (wit/flat.wit)."""
    out = []
    for voff, vlen, koff, klen, flags, _, ts in SPAN.iter_unpack(spans):
        out.append(
            types.Record(
                key=bytes(data[koff : koff + klen]) if flags & HAS_KEY else None,
                value=bytes(data[voff : voff + vlen]),
                timestamp=ts if flags & HAS_TIMESTAMP else None,
            )
        )
    return out


def _process(port, batch):
    if port not in (PORT_A, PORT_B):
        raise _fail(types.Error_Other, f"reconcile has inputs 0 (a) and 1 (b), got port {port}")
    # Every record is checked before any is used: a bad batch changes nothing.
    parsed = []
    for rec in batch:
        try:
            v = _parse_json(rec.value)
        except ValueError as e:
            shown = rec.value[:200].decode("utf-8", "replace")
            raise _fail(
                types.Error_InvalidInput,
                f"record value is not the expected JSON ({e}): {shown}",
            )
        ts = _timestamp_of(rec, port, v)
        parsed.append((_key_of(rec, v), _amount_of(v), ts))
    # One state read and one write per batch.
    keys = sorted({k for k, _, _ in parsed})
    stored = state.get_many([k.encode() + SUFFIX for k in keys])
    pending = {}
    for k, raw in zip(keys, stored):
        p = (
            _decode_pending(raw)
            if raw is not None
            else {"a": None, "b": None, "done": False, "t": None}
        )
        pending[k] = [p, False]
    out, late = [], []
    side = "a" if port == PORT_A else "b"
    for (key, amount, ts), rec in zip(parsed, batch):
        entry = pending[key]
        p = entry[0]
        if p["done"]:
            if _timeout is not None:
                late.append(rec)
            continue
        if _timeout is not None and ts is not None and p["t"] is None:
            p["t"] = ts
            entry[1] = True
            timers.register_timer(key.encode(), EVENT_TIME, _sat(ts + _timeout))
        if p[side] is not None:
            continue
        p[side] = amount
        entry[1] = True
        if p["a"] is not None and p["b"] is not None:
            out.append(_classified(key, p, ts))
            p["done"] = True
            if _timeout is not None and p["t"] is not None:
                t = p["t"]
                timers.delete_timer(key.encode(), EVENT_TIME, _sat(t + _timeout))
                timers.register_timer(key.encode(), EVENT_TIME, _sat(t + 2 * _timeout))
                entry[0] = _tombstone(t)
    if out:
        emit.emit_batch(OUT, out)
    if late:
        emit.emit_batch(LATE, late)
    updates = [
        state.Entry(key=k.encode() + SUFFIX, value=_encode_pending(p))
        for k, (p, changed) in pending.items()
        if changed
    ]
    if updates:
        state.put_many(updates)


def _finish():
    # Under `timeout` the end of input fired every key's timer before this,
    # so only keys of a run without `timeout` are left.
    entries = []
    after = None
    while True:
        page = state.scan(b"", after, SCAN_PAGE)
        entries.extend(page)
        if len(page) < SCAN_PAGE:
            break
        after = page[-1].key
    out = []
    updates = []
    for e in entries:
        if not e.key.endswith(SUFFIX):
            continue
        key = e.key[: -len(SUFFIX)].decode("utf-8", "replace")
        p = _decode_pending(e.value)
        if not p["done"]:
            rec = _classified(key, p, None)
            if rec is not None:
                out.append(rec)
            p["done"] = True
            updates.append(state.Entry(key=e.key, value=_encode_pending(p)))
    if out:
        emit.emit_batch(OUT, out)
    if updates:
        state.put_many(updates)


class FlatLifecycle(wit_world.exports.FlatLifecycle):
    def process(self, port, data, spans):
        _process(port, _records(data, spans))


class TimerLifecycle(wit_world.exports.TimerLifecycle):
    def on_timers(self, domain, data, spans):
        """Only `timeout` registers timers: at first timestamp + timeout a
        waiting key is emitted and becomes a tombstone, at first timestamp + 2
        x timeout a tombstone is dropped."""
        out = []
        for timer in _records(data, spans):
            if _timeout is None:
                continue
            try:
                key = timer.key.decode("utf-8")
            except UnicodeDecodeError:
                continue
            raw = state.get(timer.key + SUFFIX)
            if raw is None:
                continue
            p = _decode_pending(raw)
            if p["done"]:
                state.delete(timer.key + SUFFIX)
            else:
                # Each record gets its own timer's time (the host would give
                # records without one the time of the call's last timer).
                rec = _classified(key, p, timer.timestamp)
                if rec is not None:
                    out.append(rec)
                state.put(timer.key + SUFFIX, _encode_pending(_tombstone(p["t"])))
                # The timer was at first timestamp + timeout.
                timers.register_timer(timer.key, EVENT_TIME, _sat(timer.timestamp + _timeout))
        if out:
            emit.emit_batch(OUT, out)


class Snapshot(wit_world.exports.Snapshot):
    def snapshot(self):
        return b""

    def restore(self, state_version, data):
        if data:
            raise _fail(
                types.Error_IncompatibleState,
                f"this operator keeps no in-memory state but got {len(data)} snapshot bytes "
                f"(state version {state_version})",
            )
