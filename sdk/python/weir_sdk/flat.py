"""The packed buffers of wit/flat.wit and wit/flat-state.wit.

A flat batch is `data` plus one 32-byte span per record (value offset and
length, key offset and length, flags: bit 0 key, bit 1 timestamp, bits
2..5 the change kind, bit 5 the value is a row (`weir_sdk.row`);
reserved, timestamp; little-endian). A packed state buffer repeats, per
item, u32 lengths then bytes; the length 0xFFFF_FFFF (`ABSENT`) is no
value.
"""

import struct

from . import row as row_mod
from .record import Change, Record

#: One flat span (wit/flat.wit).
SPAN = struct.Struct("<IIIIIIq")
HAS_KEY = 1
HAS_TIMESTAMP = 2
CHANGE_SHIFT = 2
CHANGE_MASK = 0b111 << CHANGE_SHIFT
ROW = 1 << 5
_CHANGES = list(Change)
#: The length that means "no value" in a packed state buffer.
ABSENT = 0xFFFF_FFFF

_U32 = struct.Struct("<I")
_U32_PAIR = struct.Struct("<II")
_new_record = Record.__new__


def records(data, spans):
    """The records of a flat batch, in order."""
    out = []
    append = out.append
    for voff, vlen, koff, klen, flags, _, ts in SPAN.iter_unpack(spans):
        r = _new_record(Record)
        r.value = data[voff : voff + vlen]
        r.key = data[koff : koff + klen] if flags & HAS_KEY else None
        r.timestamp = ts if flags & HAS_TIMESTAMP else None
        r.change = _CHANGES[(flags & CHANGE_MASK) >> CHANGE_SHIFT]
        # ROW is the highest flag the host sets.
        r.is_row = flags >= ROW
        append(r)
    return out


class FlatWriter:
    """Records packed as a flat batch, appended one at a time."""

    __slots__ = ("data", "spans", "count")

    def __init__(self):
        self.data = bytearray()
        self.spans = bytearray()
        self.count = 0

    def push(self, key, value, timestamp, change=0, row=False, fields=None):
        """Appends a record whose value is `value` (bytes; a row's bytes
        with `row`), or with `fields` the row of `fields` written in place
        (`weir_sdk.row.write`; a `BadRow` appends nothing)."""
        data = self.data
        voff = len(data)
        if fields is None:
            data += value
        else:
            row_mod.write(data, fields)
            row = True
        vlen = len(data) - voff
        if key is None:
            koff = klen = 0
            flags = 0
        else:
            koff = len(data)
            klen = len(key)
            data += key
            flags = HAS_KEY
        flags |= change << CHANGE_SHIFT
        if row:
            flags |= ROW
        if timestamp is None:
            timestamp = 0
        else:
            flags |= HAS_TIMESTAMP
        self.spans += SPAN.pack(voff, vlen, koff, klen, flags, 0, timestamp)
        self.count += 1

    def take(self):
        """The packed (data, spans), leaving the writer empty."""
        out = (bytes(self.data), bytes(self.spans))
        self.data = bytearray()
        self.spans = bytearray()
        self.count = 0
        return out


def pack_records(records):
    """`records` (an iterable of `Record`) as a flat (data, spans)."""
    w = FlatWriter()
    for r in records:
        w.push(r.key, r.value, r.timestamp, r.change, r.is_row)
    return w.take()


def pack_keys(keys):
    """Keys (bytes) packed for `flat-state.get-many`."""
    out = bytearray()
    pack = _U32.pack
    for k in keys:
        out += pack(len(k))
        out += k
    return bytes(out)


def unpack_keys(buf):
    """The keys of a `get-many` buffer (the inverse of `pack_keys`)."""
    out, pos, n = [], 0, len(buf)
    while pos < n:
        (klen,) = _U32.unpack_from(buf, pos)
        pos += 4
        if klen == ABSENT or pos + klen > n:
            raise ValueError(f"keys buffer: item {len(out)} runs past the end")
        out.append(bytes(buf[pos : pos + klen]))
        pos += klen
    return out


def unpack_values(buf, count):
    """`count` values (bytes or None) of a `get-many` reply."""
    out, pos = [], 0
    unpack = _U32.unpack_from
    for _ in range(count):
        (vlen,) = unpack(buf, pos)
        pos += 4
        if vlen == ABSENT:
            out.append(None)
        else:
            out.append(buf[pos : pos + vlen])
            pos += vlen
    if pos != len(buf):
        raise ValueError(f"get-many reply: {len(buf) - pos} bytes left over after {count} values")
    return out


def pack_values(values):
    """Values (bytes or None) packed as a `get-many` reply."""
    out = bytearray()
    pack = _U32.pack
    for v in values:
        if v is None:
            out += pack(ABSENT)
        else:
            out += pack(len(v))
            out += v
    return bytes(out)


def pack_entries(entries):
    """(key, value or None) pairs packed for `flat-state.put-many`."""
    out = bytearray()
    pack = _U32_PAIR.pack
    for k, v in entries:
        if v is None:
            out += pack(len(k), ABSENT)
            out += k
        else:
            out += pack(len(k), len(v))
            out += k
            out += v
    return bytes(out)


def unpack_entries(buf):
    """The (key, value or None) pairs of a `put-many` or `scan` buffer."""
    out, pos, n = [], 0, len(buf)
    unpack = _U32_PAIR.unpack_from
    while pos < n:
        if pos + 8 > n:
            raise ValueError(f"entries buffer: item {len(out)} runs past the end")
        klen, vlen = unpack(buf, pos)
        pos += 8
        end = pos + klen + (0 if vlen == ABSENT else vlen)
        if klen == ABSENT or end > n:
            raise ValueError(f"entries buffer: item {len(out)} runs past the end")
        key = bytes(buf[pos : pos + klen])
        value = None if vlen == ABSENT else bytes(buf[pos + klen : end])
        out.append((key, value))
        pos = end
    return out
