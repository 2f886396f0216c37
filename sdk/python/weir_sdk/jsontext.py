"""JSON text exactly as the Rust SDK (serde_json) writes it, so that state
values and records are byte-for-byte the same from a Rust and a Python
build of one operator: compact, floats in their shortest round-trip form
laid out as serde_json does (`20.0`, `1e+16`, `1.5e-7`), NaN and the
infinities as `null`, strings with serde_json's escapes, dicts in their own
order (a dataclass in field order, like a Rust struct).
"""

import dataclasses
import math
from decimal import Decimal
from json.encoder import encode_basestring as _string


def fmt_f64(x):
    """A float as serde_json writes it: the shortest text that reads back
    as `x`, as `20.0`, `0.00001`, `1e+16`, `1.5e-7`; `null` for NaN and the
    infinities."""
    if not math.isfinite(x):
        return "null"
    text = repr(x)
    if "e" not in text:
        # Python and serde_json both write 1e-4 <= |x| < 1e16 in decimal
        # notation, with the shortest digits and at least one decimal.
        return text
    sign, digits, exp = Decimal(repr(x)).normalize().as_tuple()
    sign = "-" if sign else ""
    digits = "".join(map(str, digits))
    if digits == "0":
        return sign + "0.0"
    n = len(digits)
    point = n + exp  # x = 0.<digits> * 10^point
    if 0 < point <= 16 and n <= point:
        return sign + digits + "0" * (point - n) + ".0"
    if 0 < point <= 16:
        return sign + digits[:point] + "." + digits[point:]
    if -5 < point <= 0:
        return sign + "0." + "0" * (-point) + digits
    m = digits if n == 1 else digits[0] + "." + digits[1:]
    e = point - 1
    return sign + m + ("e+" if e >= 0 else "e-") + str(abs(e))


#: A string as a JSON string literal (the C encoder itself: it runs per
#: record in many operators).
json_str = _string


def json_text(value, sort_keys=False):
    """`value` (None, bool, int, float, str, list, tuple, dict with str keys,
    dataclass instance) as compact JSON text. `sort_keys` orders dict keys
    by their UTF-8 bytes, as serde_json's `Value` does."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return fmt_f64(value)
    if isinstance(value, dict):
        items = value.items()
        if sort_keys:
            items = sorted(items, key=lambda kv: kv[0].encode())
        parts = []
        for k, v in items:
            if not isinstance(k, str):
                raise TypeError(f"JSON object keys must be strings, got {type(k).__name__}")
            parts.append(_string(k) + ":" + json_text(v, sort_keys))
        return "{" + ",".join(parts) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(json_text(v, sort_keys) for v in value) + "]"
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return json_text(fields, sort_keys)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
