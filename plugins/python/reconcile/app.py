"""`reconcile` (对账) in Python: the same operator as plugins/reconcile (Rust).

Inputs `a` and `b` carry JSON objects with an `amount` (a number, or a string
holding one, as CSV sources produce). The key is the record key, else the
JSON field named by `key_field` (default "key"). For each key the operator
emits exactly one record, keyed by the key:

  {"key": k, "status": "MATCH" | "AMOUNT_MISMATCH" | "ONLY_A" | "ONLY_B",
   "a": <amount or null>, "b": <amount or null>}

as soon as both sides are present (MATCH when |a - b| <= tolerance), and for
keys seen on one side only, at `finish`. The first record per key and side
counts; later records for a side already seen are ignored.

State layout (state version 1, shared with the Rust build): key `<k>` 0x00
`rc`, value JSON `{"a": <f64>, "b": <f64>, "done": true}` where an absent
side and `done: false` are omitted.

Config (JSON, optional): {"tolerance": 0.0, "key_field": "key"}.

Build: scripts/build-polyglot.sh python (componentize-py).
"""

import json
import math
import re
from decimal import Decimal

import wit_world.exports
from componentize_py_types import Err
from wit_world.imports import emit, state, types

SUFFIX = b"\x00rc"
PORT_A, PORT_B = 0, 1
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


def _encode_pending(p):
    parts = []
    if p["a"] is not None:
        parts.append('"a":' + fmt_f64(p["a"]))
    if p["b"] is not None:
        parts.append('"b":' + fmt_f64(p["b"]))
    if p["done"]:
        parts.append('"done":true')
    return ("{" + ",".join(parts) + "}").encode()


def _decode_pending(data):
    try:
        v = _parse_json(data)
        a, b = v.get("a"), v.get("b")
        return {
            "a": None if a is None else float(a),
            "b": None if b is None else float(b),
            "done": bool(v.get("done", False)),
        }
    except (ValueError, AttributeError, TypeError) as e:
        raise _fail(
            types.Error_IncompatibleState,
            f"state `rc` holds a value that does not decode: {e}",
        )


def _classified(key, p):
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
    return types.Record(key=key.encode(), value=value.encode(), timestamp=None)


class Lifecycle(wit_world.exports.Lifecycle):
    def describe(self):
        return types.OperatorInfo(
            name="reconcile",
            version="0.1.0",
            inputs=["a", "b"],
            outputs=["out"],
            state_version=1,
        )

    def open(self, ctx):
        global _tolerance, _key_field
        text = ctx.config if ctx.config.strip() else "{}"
        try:
            config = json.loads(text)
        except ValueError as e:
            raise _fail(types.Error_InvalidConfig, f"config is not JSON: {e}")
        if not isinstance(config, dict):
            raise _fail(types.Error_InvalidConfig, "config must be a JSON object")
        for field in config:
            if field not in ("tolerance", "key_field"):
                raise _fail(
                    types.Error_InvalidConfig,
                    f"unknown field `{field}`, expected `tolerance` or `key_field`",
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
        _tolerance, _key_field = tolerance, key_field

    def process(self, port, batch):
        if port not in (PORT_A, PORT_B):
            raise _fail(
                types.Error_Other, f"reconcile has inputs 0 (a) and 1 (b), got port {port}"
            )
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
            parsed.append((_key_of(rec, v), _amount_of(v)))
        # One state read and one write per batch.
        keys = sorted({k for k, _ in parsed})
        stored = state.get_many([k.encode() + SUFFIX for k in keys])
        pending = {}
        for k, raw in zip(keys, stored):
            p = _decode_pending(raw) if raw is not None else {"a": None, "b": None, "done": False}
            pending[k] = [p, False]
        out = []
        side = "a" if port == PORT_A else "b"
        for key, amount in parsed:
            entry = pending[key]
            p = entry[0]
            if p["done"] or p[side] is not None:
                continue
            p[side] = amount
            entry[1] = True
            if p["a"] is not None and p["b"] is not None:
                out.append(_classified(key, p))
                p["done"] = True
        if out:
            emit.emit_batch(0, out)
        updates = [
            state.Entry(key=k.encode() + SUFFIX, value=_encode_pending(p))
            for k, (p, changed) in pending.items()
            if changed
        ]
        if updates:
            state.put_many(updates)

    def on_checkpoint(self, checkpoint_id):
        pass

    def finish(self):
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
                rec = _classified(key, p)
                if rec is not None:
                    out.append(rec)
                p["done"] = True
                updates.append(state.Entry(key=e.key, value=_encode_pending(p)))
        if out:
            emit.emit_batch(0, out)
        if updates:
            state.put_many(updates)


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
