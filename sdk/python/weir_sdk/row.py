"""Rows: a record's value as named, typed fields (wit/flat.wit), read and
written without JSON text.

A row is its fields one after another, each: a type byte (0 null, 1
false, 2 true, 3 signed 64-bit integer, 4 unsigned 64-bit integer, 5
float, 6 string, 7 decimal), the name's length (one byte) and the name
(UTF-8), then for a number its 8 bytes (little-endian), for a string or a
decimal its length (u32, little-endian) and its UTF-8 bytes (a decimal is
a JSON number kept digit for digit, `12.50`). As JSON a row is the object
of its fields in order, which is what operators that do not read rows get.

In Python a row is a dict of its fields in order: None, bool, int, float,
str and `decimal.Decimal` values.

A value in keyed state may be a row too (a "row value", flat/src/state.rs):
the byte `ROW_VALUE` (0xFF, which begins neither JSON text nor UTF-8)
followed by a row; `encode_value` writes one, `read_value` reads one.
"""

import re
import struct
from decimal import Decimal

from .jsontext import json_str, json_text

NULL, FALSE, TRUE, INT, UINT, FLOAT, STRING, DECIMAL = range(8)

_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")
_F64 = struct.Struct("<d")
_U32 = struct.Struct("<I")
_MIN_I64, _MAX_I64, _MAX_U64 = -(2**63), 2**63 - 1, 2**64 - 1

#: The first byte of a state value that is a row rather than JSON text.
ROW_VALUE = 0xFF
_ROW_VALUE = bytes((ROW_VALUE,))
#: The text of a JSON number, as a row's decimal holds it.
_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")

#: A field name to its heads by type: the type byte, the name's length and
#: the name, ready to append (for names written before).
_heads = {}
_HEADS_MAX = 4096
_pack_u32, _pack_i64, _pack_u64, _pack_f64 = _U32.pack, _I64.pack, _U64.pack, _F64.pack


class BadRow(ValueError):
    """Bytes that are no row, or a value a row cannot hold."""


def _heads_of(name):
    heads = _heads.get(name)
    if heads is None:
        if name.__class__ is not str:
            raise BadRow(f"a row's field names are str, not {type(name).__name__}: {name!r}")
        encoded = name.encode()
        if len(encoded) > 255:
            raise BadRow(f"a row's field name is at most 255 bytes: {name[:40]!r}... has {len(encoded)}")
        heads = [bytes((kind, len(encoded))) + encoded for kind in range(8)]
        if len(_heads) < _HEADS_MAX:
            _heads[name] = heads
    return heads


def write(out, fields):
    """Appends the row of `fields` (a dict, or (name, value) pairs, in the
    row's order) to the bytearray `out`. Values: None, bool, int (signed
    64-bit, else unsigned 64-bit), float (not finite: JSON null, as for
    JSON text), str, `decimal.Decimal` (finite; kept as written). Anything
    else is a `BadRow` naming the field, with nothing appended."""
    start = len(out)
    heads_of = _heads.get
    try:
        for name, v in fields.items() if fields.__class__ is dict else fields:
            heads = heads_of(name) or _heads_of(name)
            cls = v.__class__
            if cls is str:
                b = v.encode()
                out += heads[STRING]
                out += _pack_u32(len(b))
                out += b
            elif cls is int:
                if _MIN_I64 <= v <= _MAX_I64:
                    out += heads[INT]
                    out += _pack_i64(v)
                elif 0 <= v <= _MAX_U64:
                    out += heads[UINT]
                    out += _pack_u64(v)
                else:
                    raise BadRow(f"field `{name}`: {v} does not fit 64 bits; write it as a Decimal")
            elif cls is float:
                out += heads[FLOAT]
                out += _pack_f64(v)
            elif v is None:
                out += heads[NULL]
            elif v is True or v is False:
                out += heads[TRUE if v else FALSE]
            elif isinstance(v, Decimal):
                if not v.is_finite():
                    raise BadRow(f"field `{name}`: a row's decimal is a number, not {v}")
                b = str(v).encode()
                out += heads[DECIMAL]
                out += _pack_u32(len(b))
                out += b
            else:
                raise BadRow(
                    f"field `{name}`: a row holds None, bool, int, float, str or Decimal, "
                    f"not {type(v).__name__}; emit nested values as JSON (Context.emit_json)"
                )
    except BaseException:
        del out[start:]
        raise


def encode(fields):
    """The row of `fields` as bytes (see `write`)."""
    out = bytearray()
    write(out, fields)
    return bytes(out)


def read(buf, decimal=Decimal):
    """The fields of row `buf` as a dict in order (a name given twice keeps
    its last value); decimals through `decimal` (their text). A `BadRow`
    saying where, when `buf` is no row."""
    out = {}
    at, n = 0, len(buf)
    u32 = _U32.unpack_from
    try:
        while at < n:
            kind = buf[at]
            end = at + 2 + buf[at + 1]
            name = buf[at + 2 : end].decode()
            if kind == STRING:
                at = end + 4 + u32(buf, end)[0]
                out[name] = buf[end + 4 : at].decode()
            elif kind == INT:
                at = end + 8
                out[name] = _I64.unpack_from(buf, end)[0]
            elif kind == UINT:
                at = end + 8
                out[name] = _U64.unpack_from(buf, end)[0]
            elif kind == FLOAT:
                at = end + 8
                out[name] = _F64.unpack_from(buf, end)[0]
            elif kind == DECIMAL:
                at = end + 4 + u32(buf, end)[0]
                out[name] = decimal(buf[end + 4 : at].decode())
            elif kind <= TRUE:
                at = end
                out[name] = None if kind == NULL else kind == TRUE
            else:
                break
    except (IndexError, struct.error, UnicodeDecodeError):
        at = -1
    if at != n:
        # A short slice reads as a short name or string: the end says so.
        # The careful reader says where.
        items(buf, decimal=str)
        raise BadRow("the row is malformed")
    return out


def items(buf, decimal=Decimal):
    """The fields of row `buf` as (name, value) pairs in order (each, also
    a name given twice), checked field by field: a `BadRow` says where."""
    out = []
    append = out.append
    at, n = 0, len(buf)
    i64, u64, f64, u32 = _I64.unpack_from, _U64.unpack_from, _F64.unpack_from, _U32.unpack_from
    try:
        while at < n:
            start = at
            kind = buf[at]
            end = at + 2 + buf[at + 1]
            if end > n:
                raise IndexError
            name = str(buf[at + 2 : end], "utf-8")
            at = end
            if kind == STRING or kind == DECIMAL:
                (m,) = u32(buf, at)
                at += 4 + m
                if at > n:
                    raise IndexError
                text = str(buf[at - m : at], "utf-8")
                append((name, text if kind == STRING else decimal(text)))
            elif kind == INT:
                append((name, i64(buf, at)[0]))
                at += 8
            elif kind == UINT:
                append((name, u64(buf, at)[0]))
                at += 8
            elif kind == FLOAT:
                append((name, f64(buf, at)[0]))
                at += 8
            elif kind <= TRUE:
                append((name, None if kind == NULL else kind == TRUE))
            else:
                raise BadRow(f"the row's field at byte {start} has unknown type {kind}")
    except (IndexError, struct.error):
        raise BadRow(f"the row ends inside its field at byte {start}") from None
    except UnicodeDecodeError:
        raise BadRow(f"the row's field at byte {start} has a name or string that is not UTF-8") from None
    return out


def to_json(buf):
    """Row `buf` as the JSON text the host gives operators that do not read
    rows: the object of its fields in order (each, also a name given
    twice), compact, numbers as serde_json writes them, decimals as
    written."""
    fields = items(buf, decimal=_Decimal)
    return "{" + ",".join(json_str(name) + ":" + _json(v) for name, v in fields) + "}"


class _Decimal(str):
    """A decimal's text, kept as written for `to_json`."""


def _json(v):
    # A decimal is its own JSON text; every other value as the SDK writes JSON.
    return str(v) if v.__class__ is _Decimal else json_text(v)


def encode_value(fields):
    """`fields` as a state value that is a row: `ROW_VALUE` and the row
    (see `write`; a `BadRow` for what a row cannot hold). Unlike JSON text,
    floats that are not finite keep their bits."""
    out = bytearray(_ROW_VALUE)
    write(out, fields)
    return bytes(out)


def is_value(data):
    """Whether state value `data` is a row (begins with `ROW_VALUE`), not
    JSON text."""
    return data[:1] == _ROW_VALUE


def read_value(data, decimal=Decimal):
    """The fields of state value `data` (`ROW_VALUE` and a row) as a dict in
    order, as `read` gives them; `decimal` gets each decimal's text, checked
    to be a JSON number. A `BadRow` saying what is wrong, when it is no row
    value."""
    if data[:1] != _ROW_VALUE:
        raise BadRow("a row value begins with the byte 0xFF")
    buf = bytes(data[1:])

    def checked(text):
        if _NUMBER.fullmatch(text) is None:
            raise BadRow(f"the row's decimal {text[:40]!r} is not a JSON number")
        return decimal(text)

    try:
        return read(buf, checked)
    except BadRow:
        items(buf, decimal=str)  # a truncated field says where first
        raise
