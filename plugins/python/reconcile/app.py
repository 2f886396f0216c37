"""`reconcile` (对账) in Python on `weir_sdk`: the same operator as
plugins/reconcile (Rust).

Inputs `a` and `b` carry JSON objects or rows (as `csv` sources write them)
with an `amount` (a number, or a string holding one). The key is the record key, else the
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

State (version 2, shared with the Rust build): `MapState("rc")`, key `<k>`
0x00 `rc`, value a row value (0xFF and a row, `weir_sdk.row`) of the fields
`a` (f64), `b` (f64), `done` (true), `t` (s64, the first timestamp), in
that order, where an absent side, `done: false` and `t` (set only under
`timeout`) are left out; a done key keeps no amounts (FF 02 04 `done`).
Version 1 wrote the same fields as JSON (`{"a":12.5}`, `{"done":true}`):
such values are still read, so a version 1 checkpoint continues. Timers
(under `timeout`): one event-time timer per key, keyed by the key, at t +
timeout while it waits, at t + 2 x timeout while it is a tombstone.

Config (JSON, optional): {"tolerance": 0.0, "key_field": "key", "timeout": "30s"}.

Build: scripts/build-polyglot.sh python. Test: pytest plugins/python.
"""

import json
import math
import re
import struct
from dataclasses import dataclass
from typing import Any

import weir_sdk
from weir_sdk import (
    IncompatibleState,
    InvalidConfig,
    InvalidInput,
    MapState,
    Operator,
    fmt_f64,
    json_str,
    json_text,
    row,
    trim,
)

PORT_A, PORT_B = 0, 1
OUT, LATE = 0, 1
I64_MAX = 2**63 - 1
# What Rust's `str::parse::<f64>` accepts (after `trim`).
FLOAT_RE = re.compile(
    r"[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|inf|infinity|nan)\Z", re.IGNORECASE
)


def _shown(v):
    """A parsed JSON value as serde_json's `Value` prints it (keys sorted)."""
    return json_text(v, sort_keys=True)


def _no_constants(name):
    raise ValueError(f"invalid number {name}")


def _parse_int(text):
    # serde_json reads `-0` as the float -0.0.
    return -0.0 if text.lstrip("-").strip("0") == "" and text.startswith("-") else int(text)


_DECODER = json.JSONDecoder(parse_constant=_no_constants, parse_int=_parse_int)


def _parse_json(data):
    return _DECODER.decode(data.decode("utf-8"))


def _parse_decimal(text):
    """A row's decimal (a JSON number's text) as `_parse_json` reads it."""
    if "." in text or "e" in text or "E" in text:
        return float(text)
    return _parse_int(text)


def _amount_of(v):
    if not isinstance(v, dict) or "amount" not in v:
        raise InvalidInput(f"record has no `amount`: {_shown(v)}")
    amount = v["amount"]
    if isinstance(amount, bool):
        result = None
    elif isinstance(amount, float) and not math.isfinite(amount):
        result = None  # A row's float that is not finite is JSON's null.
    elif isinstance(amount, (int, float)):
        result = float(amount)
    elif isinstance(amount, str) and FLOAT_RE.match(trim(amount)):
        result = float(trim(amount))
    else:
        result = None
    if result is None:
        raise InvalidInput(f"`amount` is not a number: {_shown(amount)}")
    return result


def _sat(x):
    """x saturated to s64, as Rust's saturating_add (x is never below -2**63)."""
    return min(x, I64_MAX)


def parse_duration_ms(text):
    """Milliseconds of "250ms", "10s", "1.5s", "5m", "2h", "1d", as
    weir_sdk::window::parse_duration_ms reads them; None when it is no
    duration."""
    t = trim(text)
    split = next((i for i, c in enumerate(t) if not (c in "0123456789.")), len(t))
    number, unit = t[:split], trim(t[split:])
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
            raise InvalidConfig(f"`timeout`: {value} is a negative duration")
        ms = value
    elif isinstance(value, str):
        ms = parse_duration_ms(value)
    if ms is None:
        raise InvalidConfig(
            f'`timeout`: {_shown(value)} is not a duration; write e.g. "250ms", "10s", "5m", "1h"'
        )
    if ms == 0:
        raise InvalidConfig(
            "`timeout` must be longer than 0ms (leave it out to wait for the end of input)"
        )
    return ms


@dataclass
class Config:
    tolerance: float = 0.0
    key_field: str = "key"
    timeout: Any = None

    def __post_init__(self):
        if math.isnan(self.tolerance) or self.tolerance < 0.0:
            raise InvalidConfig(f"`tolerance` must be >= 0, got {fmt_f64(self.tolerance)}")
        self.timeout = _timeout_of(self.timeout)


class Pending:
    """A key's state: each side's first amount, whether it was emitted, its
    first timestamp (under `timeout`)."""

    __slots__ = ("a", "b", "done", "t")

    def __init__(self, a=None, b=None, done=False, t=None):
        self.a, self.b, self.done, self.t = a, b, done, t


# A row value's heads (weir_sdk.row): type byte, name length, name.
_ROW = b"\xff"
_A, _B, _DONE, _T = b"\x05\x01a", b"\x05\x01b", b"\x02\x04done", b"\x03\x01t"
# The whole values of the shapes this operator stores, each packed and
# unpacked in one call: one side (0xFF, its head, the double), one side and
# t, done, done and t.
_HEAD_A, _HEAD_B, _ROW_DONE = _ROW + _A, _ROW + _B, _ROW + _DONE
_pack_x, _unpack_x = struct.Struct("<4sd").pack, struct.Struct("<4sd").unpack
_pack_x_t, _unpack_x_t = struct.Struct("<4sd3sq").pack, struct.Struct("<4sd3sq").unpack
_pack_done_t, _unpack_done_t = struct.Struct("<7s3sq").pack, struct.Struct("<7s3sq").unpack
_pack_d, _pack_q = struct.Struct("<d").pack, struct.Struct("<q").pack
_new = object.__new__


class _Text(str):
    """A row's decimal, kept as its text until a field says what it is."""


def _shown_field(v):
    """A row value's field as JSON shows it (a decimal as its number)."""
    return str(v) if v.__class__ is _Text else _shown(v)


class PendingCodec:
    """`Pending` as a row value of the fields the Rust build's serde writes
    (absent sides, `done: false` and `t: None` left out); reads the JSON
    of state version 1 too."""

    @staticmethod
    def encode(p):
        a, b, t = p.a, p.b, p.t
        # The shapes the operator stores, in one pack each.
        if p.done:
            if a is None and b is None:
                return _ROW_DONE if t is None else _pack_done_t(_ROW_DONE, _T, t)
        elif b is None:
            if a is not None:
                return _pack_x(_HEAD_A, a) if t is None else _pack_x_t(_HEAD_A, a, _T, t)
        elif a is None:
            return _pack_x(_HEAD_B, b) if t is None else _pack_x_t(_HEAD_B, b, _T, t)
        out = bytearray(_ROW)
        if a is not None:
            out += _A
            out += _pack_d(a)
        if b is not None:
            out += _B
            out += _pack_d(b)
        if p.done:
            out += _DONE
        if t is not None:
            out += _T
            out += _pack_q(t)
        return bytes(out)

    @staticmethod
    def decode(data):
        # The shapes the operator stores, each unpacked in one call, into a
        # `Pending` made without a call of its `__init__` (a third of the
        # cost); any other value the long way.
        n = len(data)
        a = b = t = None
        done = False
        if n == 12:
            head, x = _unpack_x(data)
            if head == _HEAD_A:
                a = x
            elif head == _HEAD_B:
                b = x
            else:
                return _decode_any(data)
        elif n == 7 and data == _ROW_DONE:
            done = True
        elif n == 23:
            head, x, t_head, t = _unpack_x_t(data)
            if head == _HEAD_A and t_head == _T:
                a = x
            elif head == _HEAD_B and t_head == _T:
                b = x
            else:
                return _decode_any(data)
        elif n == 18:
            head, t_head, t = _unpack_done_t(data)
            if head != _ROW_DONE or t_head != _T:
                return _decode_any(data)
            done = True
        else:
            return _decode_any(data)
        p = _new(Pending)
        p.a = a
        p.b = b
        p.done = done
        p.t = t
        return p


def _decode_any(data):
    """A row value of any shape (state version 2) or JSON (version 1)."""
    try:
        if row.is_value(data):
            return _decode_row(data)
        v = _parse_json(data)
        a, b, t = v.get("a"), v.get("b"), v.get("t")
        if not (t is None or (isinstance(t, int) and not isinstance(t, bool))):
            raise ValueError(f"`t` is not an integer: {_shown(t)}")
        return Pending(
            None if a is None else float(a),
            None if b is None else float(b),
            bool(v.get("done", False)),
            t,
        )
    except (ValueError, AttributeError, TypeError) as e:
        raise IncompatibleState(f"state `rc` holds a value that does not decode: {e}") from None


def _decode_row(data):
    """Any row value, fields in any order, unknown ones skipped: a side is
    a number (a decimal's text read as a double) or null, `done` a bool,
    `t` a 64-bit signed integer or null."""
    p = Pending()
    for name, v in row.read_value(data, _Text).items():
        if name == "a" or name == "b":
            if v is None:
                x = None
            elif v.__class__ is float or v.__class__ is int or v.__class__ is _Text:
                x = float(v)  # an integer or a decimal's text as the nearest double
            else:
                raise ValueError(f"`{name}` is not a number: {_shown_field(v)}")
            if name == "a":
                p.a = x
            else:
                p.b = x
        elif name == "done":
            if v is not True and v is not False:
                raise ValueError(f"`done` is not a bool: {_shown_field(v)}")
            p.done = v
        elif name == "t":
            if v is not None and (v.__class__ is not int or v > I64_MAX):
                raise ValueError(f"`t` is not a 64-bit signed integer: {_shown_field(v)}")
            p.t = v
    return p


class Reconcile(Operator):
    name = "reconcile"
    version = "0.1.0"
    inputs = ["a", "b"]
    outputs = ["out", "late"]
    state_version = 2
    Config = Config
    # Orders from a `csv` source arrive as rows: no JSON to parse.
    reads_rows = True

    def open(self, ctx):
        c = ctx.config
        self.tolerance = c.tolerance
        self.key_field = c.key_field
        # Milliseconds of event time a key waits for its other side; None
        # waits until the end of input.
        self.timeout = c.timeout
        self.keys = MapState("rc", value=PendingCodec)

    def key_of(self, rec, v):
        if rec.key is not None:
            try:
                return rec.key.decode("utf-8")
            except UnicodeDecodeError:
                pass
        field = v.get(self.key_field) if isinstance(v, dict) else None
        if isinstance(field, float) and not math.isfinite(field):
            field = None  # A row's float that is not finite is JSON's null.
        if isinstance(field, str):
            return field
        if field is not None:
            return _shown(field)
        raise InvalidInput(
            f"record has no key and no `{self.key_field}` field (set the source's `key` or the "
            f"operator's `key_field`): {_shown(v)}"
        )

    def timestamp_of(self, rec, port, v):
        """The record's timestamp, which `timeout` needs; None without it."""
        if self.timeout is None:
            return None
        if rec.timestamp is None:
            raise InvalidInput(
                f"record on input `{'a' if port == PORT_A else 'b'}` has no timestamp, and "
                "`timeout` needs event time (set the source's `timestamp` to the field holding "
                f"the record's time, or drop `timeout`): {_shown(v)}"
            )
        return rec.timestamp

    def classified(self, ctx, key, p, timestamp):
        """Emits the key's result on `out` (nothing when neither side came)."""
        a, b = p.a, p.b
        if a is not None and b is not None:
            status = "MATCH" if abs(a - b) <= self.tolerance + 1e-9 else "AMOUNT_MISMATCH"
        elif a is not None:
            status = "ONLY_A"
        elif b is not None:
            status = "ONLY_B"
        else:
            return
        value = '{"key":%s,"status":"%s","a":%s,"b":%s}' % (
            json_str(key),
            status,
            "null" if a is None else fmt_f64(a),
            "null" if b is None else fmt_f64(b),
        )
        # Text, not a row: in CPython a formatted line costs less than
        # `emit_row` (docs/performance.md, "Rows in Python").
        ctx.emit(value, key, port=OUT, timestamp=timestamp)

    def process(self, ctx, port, batch):
        # Every record is checked before any is used: a bad batch changes nothing.
        parsed = []
        for rec in batch.records:
            if rec.is_row:
                # Typed fields, no text: decimals read as their JSON number.
                v = rec.row(decimal=_parse_decimal)
            else:
                try:
                    v = _parse_json(rec.value)
                except ValueError as e:
                    shown = rec.value[:200].decode("utf-8", "replace")
                    raise InvalidInput(f"record value is not the expected JSON ({e}): {shown}") from None
            parsed.append((self.key_of(rec, v), _amount_of(v), self.timestamp_of(rec, port, v)))
        keys, timeout = self.keys, self.timeout
        keys.prefetch([k for k, _, _ in parsed])
        side_a = port == PORT_A
        for (key, amount, ts), rec in zip(parsed, batch.records):
            p = keys.get(key)
            if p is None:
                p = Pending()
            elif p.done:
                if timeout is not None:
                    ctx.emit_record(rec, port=LATE)
                continue
            changed = False
            if timeout is not None and p.t is None:
                p.t = ts
                changed = True
                ctx.register_event_timer(key, _sat(ts + timeout))
            if (p.a if side_a else p.b) is None:
                if side_a:
                    p.a = amount
                else:
                    p.b = amount
                changed = True
                if p.a is not None and p.b is not None:
                    self.classified(ctx, key, p, ts)
                    if timeout is not None and p.t is not None:
                        t = p.t
                        ctx.delete_timer(key, weir_sdk.TimeDomain.EVENT_TIME, _sat(t + timeout))
                        ctx.register_event_timer(key, _sat(t + 2 * timeout))
                    # A done key keeps no amounts (under `timeout`, its first
                    # timestamp).
                    p = Pending(done=True, t=p.t)
            if changed:
                keys[key] = p

    def on_timers(self, ctx, timers):
        """Only `timeout` registers timers: at first timestamp + timeout a
        waiting key is emitted and becomes a tombstone, at first timestamp + 2
        x timeout a tombstone is dropped."""
        if self.timeout is None:
            return
        keys = self.keys
        names = [t.key_str() for t in timers.records]
        keys.prefetch([k for k in names if k is not None])
        for timer, key in zip(timers, names):
            if key is None:
                continue
            p = keys.get(key)
            if p is None:
                continue
            if p.done:
                del keys[key]
            else:
                self.classified(ctx, key, p, timer.time)
                keys[key] = Pending(done=True, t=p.t)
                # The timer was at first timestamp + timeout.
                ctx.register_event_timer(timer.key, _sat(timer.time + self.timeout))

    def finish(self, ctx):
        # Under `timeout` the end of input fired every key's timer before
        # this, so only keys of a run without `timeout` are left.
        done = []
        for key, p in self.keys.items():
            if not p.done:
                self.classified(ctx, key, p, None)
                done.append((key, Pending(done=True, t=p.t)))
        for key, p in done:
            self.keys[key] = p


weir_sdk.export(Reconcile, globals())
