"""Typed keyed state over the host's byte state, with the Rust SDK's layout
and encoding (sdk/src/typed.rs), so state moves between a Rust and a
Python build of one operator and `weir state` reads it:

- `MapState(name)`, key `k`: `<k>` 0x00 `<name>`, `<k>` being the key's
  UTF-8 text when it is a `str`, its JSON text otherwise (the map key comes
  first so the host partitions the entry like the records with that key);
- `ValueState(name)`: 0x00 `<name>`;
- values as JSON text as serde_json writes it (`weir_sdk.json_text`), or
  as row values: the byte 0xFF and a row (`weir_sdk.row`: typed fields,
  no text to parse), which a Rust build writes when it opted into them.
  Every codec of the SDK reads both; the default `Json` writes JSON text,
  `Row` (opt-in, `value=Row()` or `Row(SomeDataclass)`) writes rows where
  the value is a flat dict or dataclass. A plugin that switches to rows
  bumps its `state_version`: a build before the switch cannot read them.

The cache: every state object of an instance keeps decoded values in the
guest. A read of a cached key costs a dict lookup; a miss reads the host
once (`prefetch` reads every missing key of a batch with one
`flat-state.get-many`). Writes stay in the cache, dirty, until a write-back
stores them all with one `flat-state.put-many` per 4 MiB:

- when `on_checkpoint` or `finish` returns, before the host takes the
  checkpoint (so a checkpoint holds every write made before it);
- when a hook returns with more dirty entries than the dirty limit (a
  quarter of the budget, at most 8 MiB): they are written back and stay
  cached, so the write-back at a checkpoint, which pauses the operator,
  stays short however large the cache;
- when the caches hold more than their budget in bytes when a hook returns:
  everything is written back and the oldest entries are dropped down to
  half the budget; inside a hook they may hold up to twice the budget
  before that happens;
- before `MapState.items()` reads the host.

The budget defaults to an eighth of the instance's memory limit
(`flat-state.limits`), measured as the encoded key and value bytes of each
entry plus `ENTRY_OVERHEAD` for the Python objects and table slots.
"""

import dataclasses
import json
from decimal import Decimal
from itertools import islice

from . import flat, row
from .errors import IncompatibleState
from .jsontext import json_text
from .row import BadRow

#: Bytes charged per cached entry on top of its encoded key and value: the
#: Python objects of a short key and value and their dict and set slots.
ENTRY_OVERHEAD = 200
#: Largest `put-many` buffer of one write-back call.
PUT_MANY_CHUNK = 4 << 20
#: Most dirty bytes a hook may leave behind, whatever the budget.
MAX_DIRTY_LIMIT = 8 << 20
#: Keys per page when `items()` scans the host.
SCAN_PAGE = 1000

_MISSING = object()  # cached: the host has no value for the key
_UNCACHED = object()  # not in the cache


class Json:
    """Values as JSON text (the default codec): None, bool, int, float, str,
    list, dict. A `dataclass` type given instead of a codec is read and
    written as a JSON object of its fields.

    It reads row values too (0xFF and a row, as a Rust build that opted
    into them writes): the row's fields as a dict in order, each as JSON
    would read it (a decimal as an int or a float, like a JSON number), so
    such state restores into a Python build."""

    #: What a row value's decimal (its JSON number text) reads as.
    read_decimal = staticmethod(json.loads)

    def __init__(self, cls=None):
        self.cls = cls

    def encode(self, value):
        return json_text(value).encode()

    def decode(self, data):
        if row.is_value(data):
            value = row.read_value(data, self.read_decimal)
        else:
            value = json.loads(data)
        if self.cls is not None:
            if not isinstance(value, dict):
                raise ValueError(f"expected a JSON object for {self.cls.__name__}")
            names = {f.name for f in dataclasses.fields(self.cls)}
            value = self.cls(**{k: v for k, v in value.items() if k in names})
        return value


class Row(Json):
    """Values as row values where they fit (opt-in; `Json` is the default):
    a dict with str keys, or a dataclass instance, whose values are all
    None, bool, int (64 bits), float (NaN and the infinities keep their
    bits), str or `Decimal` is written as the byte 0xFF and the row of its
    fields (`weir_sdk.row`), which costs less to write and to read than
    JSON text. Any other value (nested dicts or lists, a larger int,
    non-str keys, a name over 255 bytes) is written as JSON text, exactly
    as `Json` writes it. It reads both forms; a row's decimals read as
    `Decimal`, so every value reads back as it was written. `Row(cls)`
    reads values as dataclass `cls`, like `Json(cls)`.

    Switching a plugin's state to `Row` changes its layout: bump the
    operator's `state_version`, since an older build (or one on an SDK
    without row values) cannot read rows."""

    read_decimal = Decimal

    def encode(self, value):
        cls = value.__class__
        if cls is dict:
            fields = value
        elif isinstance(value, dict):
            fields = value.items()
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            fields = [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]
        else:
            return json_text(value).encode()
        try:
            return row.encode_value(fields)
        except BadRow:
            return json_text(value).encode()


def _codec(value):
    if value is None:
        return Json()
    if isinstance(value, type) and dataclasses.is_dataclass(value):
        return Json(value)
    if hasattr(value, "encode") and hasattr(value, "decode"):
        return value
    raise TypeError("value= takes a codec (with encode and decode), a dataclass type or None")


class Store:
    """The state objects of one operator instance and their cache budget."""

    def __init__(self, host):
        self.host = host
        self.caches = []
        self.names = {}
        self.entries = 0
        # Mean encoded bytes of a key and value, measured on reads and
        # write-backs.
        self.mean_bytes = 32.0
        limits = host.limits()
        self.set_budget(limits[0] // 8)

    def set_budget(self, budget):
        """Bounds the caches to `budget` bytes (and the dirty limit to a
        quarter of it, at most 8 MiB)."""
        self.budget = max(0, int(budget))
        self.dirty_limit = min(self.budget // 4, MAX_DIRTY_LIMIT)
        self._set_cap()

    def entry_bytes(self):
        return self.mean_bytes + ENTRY_OVERHEAD

    def measure(self, nbytes, count):
        if count:
            self.mean_bytes = 0.9 * self.mean_bytes + 0.1 * (nbytes / count)
            self._set_cap()

    def _set_cap(self):
        # The most entries a hook may cache before `added` bounds them: a
        # count, so that caching a new key costs no arithmetic.
        self.cap = 2 * self.budget / self.entry_bytes()

    def register(self, cache):
        if cache.name in self.names:
            raise ValueError(f"state `{cache.name}` is opened twice in this operator; keep one object")
        self.names[cache.name] = cache
        self.caches.append(cache)

    def added(self, n):
        """`n` new entries were cached; bounds the caches inside a hook."""
        self.entries += n
        if self.entries > self.cap:
            self.write_back()
            self.evict(self.budget)

    def dirty_count(self):
        return sum(len(c.dirty) for c in self.caches)

    def after_hook(self):
        """What every hook's return does: bounds dirty entries and bytes."""
        per = self.entry_bytes()
        if self.entries * per > self.budget:
            self.write_back()
            self.evict(self.budget // 2)
        elif self.dirty_count() * per > self.dirty_limit:
            self.write_back()

    def write_back(self):
        """Stores every dirty entry in host state."""
        buf = bytearray()
        pack = flat._U32_PAIR.pack
        written = nbytes = 0
        for c in self.caches:
            if not c.dirty:
                continue
            values, encode_key, encode = c.values, c.encode_key, c.codec.encode
            for k in c.dirty:
                skey = encode_key(k)
                v = values[k]
                if v is _MISSING:
                    buf += pack(len(skey), flat.ABSENT)
                    buf += skey
                else:
                    data = encode(v)
                    buf += pack(len(skey), len(data))
                    buf += skey
                    buf += data
                    nbytes += len(data)
                nbytes += len(skey)
                written += 1
                if len(buf) >= PUT_MANY_CHUNK:
                    self.host.put_many(bytes(buf))
                    buf = bytearray()
            c.dirty = set()
        if buf:
            self.host.put_many(bytes(buf))
        self.measure(nbytes, written)

    def clear(self):
        """Drops every cached entry (write back first: dirty ones are lost)."""
        for c in self.caches:
            c.values.clear()
            c.dirty = set()
        self.entries = 0

    def evict(self, target):
        """Drops the oldest clean entries until the caches hold about
        `target` bytes."""
        per = self.entry_bytes()
        if self.entries * per <= target:
            return
        keep = target / (self.entries * per)
        total = 0
        for c in self.caches:
            drop = len(c.values) - int(len(c.values) * keep)
            if drop > 0:
                dirty = c.dirty
                victims = [k for k in islice(c.values, drop + len(dirty)) if k not in dirty][:drop]
                for k in victims:
                    del c.values[k]
            total += len(c.values)
        self.entries = total


class _Cache:
    """The cached entries of one state object."""

    def __init__(self, name, codec):
        from .runtime import active

        if not isinstance(name, str) or not name or "\x00" in name:
            raise ValueError(f"state name {name!r} must be a non-empty string without NUL")
        self.name = name
        self.codec = _codec(codec)
        self.values = {}
        self.dirty = set()
        self.store = active().store
        self.store.register(self)

    def load(self, keys):
        """Reads `keys` (none cached, no repeats) from the host, caches them
        and returns their values (`_MISSING` for none). Bounding the caches
        may evict some of them again at once (they are clean): read what a
        caller needs from the returned list, not from the cache."""
        values, decode = self.values, self.codec.decode
        skeys = [self.encode_key(k) for k in keys]
        reply = self.store.host.get_many(flat.pack_keys(skeys))
        raw = flat.unpack_values(reply, len(keys))
        nbytes = 0
        for k, sk, v in zip(keys, skeys, raw):
            if v is None:
                values[k] = _MISSING
            else:
                try:
                    values[k] = decode(v)
                except (ValueError, TypeError) as e:
                    raise IncompatibleState(
                        f"state `{self.name}` holds a value under {sk!r} that does not decode: {e}"
                    ) from None
                nbytes += len(v)
            nbytes += len(sk)
        self.store.measure(nbytes, len(keys))
        loaded = [values[k] for k in keys]
        self.store.added(len(keys))
        return loaded

    def lookup(self, key):
        v = self.values.get(key, _UNCACHED)
        if v is _UNCACHED:
            (v,) = self.load([key])
        return v

    def store_value(self, key, value):
        values = self.values
        if key not in values:
            values[key] = value
            self.dirty.add(key)
            self.store.added(1)
        else:
            values[key] = value
            self.dirty.add(key)


class MapState(_Cache):
    """A map from keys (usually record keys) to values in host state, cached
    (see the module's docs). Create it in `Operator.open`.

    `key` is the type of the map's keys: `str` (stored as their UTF-8 text)
    or any JSON type (stored as JSON text). `value` is a codec (an object
    with `encode(value) -> bytes` and `decode(bytes) -> value`), a
    dataclass type (a JSON object of its fields) or None (JSON values).

    >>> counts = MapState("count")          # doctest: +SKIP
    >>> counts["hello"] = counts.get("hello", 0) + 1   # doctest: +SKIP
    """

    def __init__(self, name, key=str, value=None):
        super().__init__(name, value)
        self.key_type = key
        self.suffix = b"\x00" + name.encode()
        suffix = self.suffix
        if key is str:
            self.encode_key = lambda k: k.encode() + suffix
        else:
            self.encode_key = lambda k: json_text(k).encode() + suffix

    def decode_key(self, skey):
        text = skey[: -len(self.suffix)].decode("utf-8")
        return text if self.key_type is str else json.loads(text)

    def get(self, key, default=None):
        """The value under `key`, or `default`."""
        v = self.values.get(key, _UNCACHED)
        if v is _UNCACHED:
            (v,) = self.load([key])
        return default if v is _MISSING else v

    def __getitem__(self, key):
        v = self.lookup(key)
        if v is _MISSING:
            raise KeyError(key)
        return v

    def __contains__(self, key):
        return self.lookup(key) is not _MISSING

    #: `m.put(key, value)` or `m[key] = value`: stores `value` under `key`.
    put = __setitem__ = _Cache.store_value

    def delete(self, key):
        """Removes `key` (removing a missing key does nothing); also
        `del m[key]`."""
        self.store_value(key, _MISSING)

    __delitem__ = delete

    def update(self, key, f, default=None):
        """Replaces the value with `f(old)` (`old` is `default` when there
        is none) and returns the new value."""
        v = f(self.get(key, default))
        self.store_value(key, v)
        return v

    def prefetch(self, keys):
        """Reads every key of `keys` that is not cached with one host call:
        call it with a batch's keys before reading them one by one."""
        values = self.values
        missing = [k for k in dict.fromkeys(keys) if k not in values]
        if missing:
            self.load(missing)

    def get_many(self, keys, default=None):
        """The values under `keys`, in order (one host call for the misses)."""
        self.prefetch(keys)
        lookup = self.lookup  # a prefetched key may have been evicted since
        return [default if (v := lookup(k)) is _MISSING else v for k in keys]

    def items(self):
        """Every (key, value) of the map in host state, in the order of the
        stored keys' bytes. Writes back the caches first (one host call),
        then reads the host a page at a time."""
        self.store.write_back()
        suffix, decode = self.suffix, self.codec.decode
        after = None
        while True:
            page = flat.unpack_entries(self.store.host.scan(b"", after, SCAN_PAGE))
            for skey, raw in page:
                if skey.endswith(suffix):
                    try:
                        yield self.decode_key(skey), decode(raw)
                    except (ValueError, TypeError) as e:
                        raise IncompatibleState(
                            f"state `{self.name}` holds an entry {skey!r} that does not decode: {e}"
                        ) from None
            if len(page) < SCAN_PAGE:
                return
            after = page[-1][0]


class ValueState(_Cache):
    """A single value per operator instance (not per key), e.g. a running
    total, cached like `MapState`. Create it in `Operator.open`."""

    def __init__(self, name, value=None):
        super().__init__(name, value)
        skey = b"\x00" + name.encode()
        self.encode_key = lambda _k: skey

    def get(self, default=None):
        """The stored value, or `default`."""
        v = self.lookup(())
        return default if v is _MISSING else v

    def set(self, value):
        """Stores `value`."""
        self.store_value((), value)

    def update(self, f, default=None):
        """Replaces the value with `f(old)` and returns the new value."""
        v = f(self.get(default))
        self.store_value((), v)
        return v

    def clear(self):
        """Removes the value."""
        self.store_value((), _MISSING)
