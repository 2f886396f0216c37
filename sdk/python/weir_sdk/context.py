"""What a hook can do besides state: emit, timers, time, the current
record's timestamp."""

from . import flat
from .errors import Error, InvalidInput
from .flat import FlatWriter
from .jsontext import json_text
from .record import Change, TimeDomain

#: Entries per host call of `Context.scan_all`.
SCAN_PAGE = 1000

#: A port's buffered records go to the host once they reach this many
#: records or bytes, else when the hook returns.
EMIT_FLUSH_RECORDS = 4096
EMIT_FLUSH_BYTES = 1 << 20


#: The default `timestamp` of `Context.emit`: the current one.
CURRENT = object()


def _bytes(x):
    return x.encode() if isinstance(x, str) else x


class OpenContext:
    """Where an instance runs, passed to `Operator.open`: `operator_id`,
    `instance` (0-based), `parallelism`, `config` (a dict, or an instance of
    the operator's `Config` dataclass) and `config_text` (the JSON)."""

    def __init__(self, operator_id, instance, parallelism, config, config_text):
        self.operator_id = operator_id
        self.instance = instance
        self.parallelism = parallelism
        self.config = config
        self.config_text = config_text


class Context:
    """Passed to every hook: emit records, read time, register timers.

    Emitted records are buffered per port and handed to the host with one
    `flat.emit` call per port when the hook returns (or when a port holds
    4,096 records or 1 MiB), in the order they were emitted.
    """

    def __init__(self, host, outputs, store):
        self._host = host
        self._store = store
        self._outputs = {name: i for i, name in enumerate(outputs)}
        self._nports = len(outputs)
        self._out = [FlatWriter() for _ in outputs]
        #: The timestamp of the record being processed (set while a batch
        #: is iterated) or of the timer firing; None when there is none.
        self.timestamp = None

    def reject(self, index, error):
        """Refuses record `index` of the batch being processed as invalid
        input because of `error` (a message), while the rest of the batch
        takes effect: the host handles that record as the operator's
        `on_error` says (the attempt fails naming it, the default; or it is
        skipped, or sent to a dead-letter sink). Refuse a record before
        writing state or emitting for it. Only in `process`; another hook,
        an index past the batch or a record refused twice fails the call.
        `Batch.each` refuses for you the records that raise."""
        self._host.reject(index, str(error))

    def _port(self, port):
        if isinstance(port, str):
            try:
                return self._outputs[port]
            except KeyError:
                raise ValueError(
                    f"no output port `{port}`; the operator's outputs are {list(self._outputs)}"
                ) from None
        if not 0 <= port < self._nports:
            raise ValueError(f"no output port {port}; the operator has {self._nports} outputs")
        return port

    def emit(self, value, key=None, *, port=0, timestamp=CURRENT, change=Change.INSERT):
        """Emits a record with `value` and `key` (str or bytes) on output
        `port` (an index or a name), with `timestamp` (ms, or None for
        none), saying `change` of its row (a `Change`; an upsert sink
        deletes a `DELETE`'s row). By default it gets the current
        timestamp: the input record's while a batch is iterated, the
        timer's in `on_timer`, none in `finish` and `on_checkpoint`."""
        if port.__class__ is not int or not 0 <= port < self._nports:
            port = self._port(port)
        if value.__class__ is str:
            value = value.encode()
        if key is not None and key.__class__ is str:
            key = key.encode()
        w = self._out[port]
        w.push(key, value, self.timestamp if timestamp is CURRENT else timestamp, change)
        # `_pushed`, inline: a call per record costs a few % here.
        if w.count >= EMIT_FLUSH_RECORDS or len(w.data) >= EMIT_FLUSH_BYTES:
            self._flush_port(port)

    def emit_row(self, fields, key=None, *, port=0, timestamp=CURRENT, change=Change.INSERT):
        """Emits a record whose value is the row of `fields` (a dict in the
        row's order, or (name, value) pairs; values None, bool, int, float,
        str, `decimal.Decimal`), with the arguments of `emit`. Readers get
        it as they read: the JSON object of its fields in order (a sink,
        an operator that reads text), or the typed fields (an operator that
        reads rows; an Avro or PostgreSQL sink writes them without JSON). A
        value a row cannot hold is a `weir_sdk.row.BadRow` (a `ValueError`)
        naming the field, and nothing is emitted."""
        if port.__class__ is not int or not 0 <= port < self._nports:
            port = self._port(port)
        if key is not None and key.__class__ is str:
            key = key.encode()
        w = self._out[port]
        w.push(key, None, self.timestamp if timestamp is CURRENT else timestamp, change, True, fields)
        self._pushed(port, w)

    def emit_record(self, record, port=0):
        """Emits `record` unchanged (key, value, timestamp, change kind; a
        row as a row) on output `port`."""
        port = self._port(port)
        w = self._out[port]
        w.push(record.key, record.value, record.timestamp, record.change, record.is_row)
        self._pushed(port, w)

    def emit_json(self, obj, key=None, *, port=0, timestamp=CURRENT):
        """Emits `obj` as compact JSON (`weir_sdk.json_text`)."""
        self.emit(json_text(obj), key, port=port, timestamp=timestamp)

    def _pushed(self, port, w):
        """After a record went into port `port`'s writer `w`: hands the port's
        records to the host once they reach the flush bounds."""
        if w.count >= EMIT_FLUSH_RECORDS or len(w.data) >= EMIT_FLUSH_BYTES:
            self._flush_port(port)

    def flush(self):
        """Hands every buffered record to the host now (the SDK does it when
        a hook returns)."""
        for port in range(self._nports):
            if self._out[port].count:
                self._flush_port(port)

    def _flush_port(self, port):
        data, spans = self._out[port].take()
        self._host.emit(port, data, spans)

    # Raw host state, bytes to bytes (e.g. to migrate the layout in
    # `restore`). Rule: a raw read first writes the `MapState` and
    # `ValueState` caches back, so it sees every typed write; a raw write
    # also empties them, so typed reads see it.

    def get(self, key):
        """The value (bytes) stored under the state key `key`, or None."""
        self._store.write_back()
        (value,) = flat.unpack_values(self._host.get_many(flat.pack_keys([_bytes(key)])), 1)
        return None if value is None else bytes(value)

    def put(self, key, value):
        """Stores `value` under the state key `key` (both bytes or str)."""
        self._raw_write([(_bytes(key), _bytes(value))])

    def delete(self, key):
        """Removes the state key `key` (a missing key does nothing)."""
        self._raw_write([(_bytes(key), None)])

    def _raw_write(self, entries):
        self._store.write_back()
        self._store.clear()
        self._host.put_many(flat.pack_entries(entries))

    def scan(self, prefix=b"", after=None, limit=SCAN_PAGE):
        """Up to `limit` (key, value) entries whose key starts with `prefix`,
        in ascending key order, after the key `after` when given."""
        self._store.write_back()
        after = None if after is None else _bytes(after)
        return flat.unpack_entries(self._host.scan(_bytes(prefix), after, limit))

    def scan_all(self, prefix=b""):
        """Every (key, value) entry whose key starts with `prefix`, in
        ascending key order, a page at a time (collect them before writing
        what you read: a raw write between pages is fine, the next page
        starts after the last key seen)."""
        after = None
        while True:
            page = self.scan(prefix, after, SCAN_PAGE)
            yield from page
            if len(page) < SCAN_PAGE:
                return
            after = page[-1][0]

    @property
    def watermark(self):
        """The instance's current watermark (ms), None before the first;
        the largest int64 after the end of input."""
        return self._host.watermark()

    def processing_time(self):
        """The host's wall clock, ms since the Unix epoch."""
        return self._host.processing_time()

    def register_timer(self, key, domain, time):
        """Registers a timer for `key` (str or bytes; use the record key)
        at `time` in `domain`, once: it fires through `Operator.on_timer`."""
        self._host.register_timer(_bytes(key), domain, time)

    def delete_timer(self, key, domain, time):
        """Deletes the timer for `key` at `time` in `domain`, if any."""
        self._host.delete_timer(_bytes(key), domain, time)

    def register_event_timer(self, key, time):
        """A timer that fires once the watermark reaches `time`."""
        self._host.register_timer(_bytes(key), TimeDomain.EVENT_TIME, time)

    def register_processing_timer(self, key, time):
        """A timer that fires once the host's clock reaches `time`."""
        self._host.register_timer(_bytes(key), TimeDomain.PROCESSING_TIME, time)


class Batch:
    """The records of one call, in arrival order. Iterating sets the
    context's current timestamp to each record's, so that what is emitted
    for a record keeps its timestamp; `records` is the plain list."""

    __slots__ = ("records", "_ctx")

    def __init__(self, records, ctx):
        self.records = records
        self._ctx = ctx

    def __iter__(self):
        ctx = self._ctx
        for r in self.records:
            ctx.timestamp = r.timestamp
            yield r

    def __len__(self):
        return len(self.records)

    def __getitem__(self, i):
        return self.records[i]

    def each(self, fn, refuse=(InvalidInput,)):
        """Calls `fn(record)` for each record in order; a record for which
        `fn` raises one of `refuse` (default `InvalidInput`; pass e.g.
        `(InvalidInput, ValueError, KeyError)` to refuse more) is refused
        with `Context.reject` and the others go on; any other exception
        ends the call. Refuse before writing state or emitting for the
        record: what `fn` did for it before raising stands."""
        ctx = self._ctx
        for i, r in enumerate(self.records):
            ctx.timestamp = r.timestamp
            try:
                fn(r)
            except refuse as e:
                ctx.reject(i, e.message if isinstance(e, Error) else f"{type(e).__name__}: {e}")


class Timers(Batch):
    """The timers of one `on_timers` call, in firing order; iterating sets
    the current timestamp to each timer's time."""

    __slots__ = ()

    def __iter__(self):
        ctx = self._ctx
        for t in self.records:
            ctx.timestamp = t.time
            yield t
