"""Run an operator in plain CPython, without building a component: an
in-memory host (`MemoryHost`) with the real host's semantics for state,
emit, timers, watermarks and checkpoints, and `Harness` to drive an
operator through its lifecycle from a test.

    from weir_sdk import Record
    from weir_sdk.testing import Harness

    def test_counts():
        h = Harness(WordCount)
        out = h.process("in", [Record("a"), Record("a")])
        assert [r.value for r in out] == [b'{"word":"a","count":1}', b'{"word":"a","count":2}']

Records an operator emits with `Context.emit_row` come back as rows
(`Record.is_row`): read them with `Record.row()`, or as a sink writes them
with `Record.as_text()`.

The operator runs the same SDK code as in a component (batches cross as
flat buffers, state through packed `get-many`/`put-many`), so what passes
here behaves the same under `weir run`.
"""

import bisect
import collections
import itertools
import time

from . import END_OF_TIME, flat
from .jsontext import json_text
from .record import Record, TimeDomain
from .runtime import Instance, describe


class LimitExceeded(RuntimeError):
    """A state key, value or total over the host's limit: the real host
    traps the call."""


class State(dict):
    """Host state: state key to value, both bytes. A dict that keeps its
    keys sorted for `scan` until it changes."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._sorted = None

    def sorted_keys(self):
        if self._sorted is None:
            self._sorted = sorted(self)
        return self._sorted

    def _changed(name):
        def method(self, *args, **kwargs):
            self._sorted = None
            return getattr(dict, name)(self, *args, **kwargs)

        method.__name__ = name
        return method

    __setitem__ = _changed("__setitem__")
    __delitem__ = _changed("__delitem__")
    pop = _changed("pop")
    popitem = _changed("popitem")
    clear = _changed("clear")
    update = _changed("update")
    setdefault = _changed("setdefault")
    del _changed


class MemoryHost:
    """The host's imports, in memory. `state` maps state keys to values
    (bytes); `timers` holds (domain, time, key); `outputs` collects
    (port, Record) as emitted; `rejected` (index, message) as refused;
    `calls` counts host calls by name."""

    def __init__(self, memory=256 << 20, max_key_bytes=64 << 10, max_value_bytes=16 << 20,
                 max_state_bytes=1 << 30):
        self.state = State()
        self.timers = set()
        self.outputs = []
        self.logs = []
        self.rejected = []
        self.calls = collections.Counter()
        self.current_watermark = None
        self.now = None
        self.memory = memory
        self.max_key_bytes = max_key_bytes
        self.max_value_bytes = max_value_bytes
        self.max_state_bytes = max_state_bytes

    def limits(self):
        self.calls["limits"] += 1
        return (self.memory, self.max_key_bytes, self.max_value_bytes, self.max_state_bytes)

    def get_many(self, keys):
        self.calls["get_many"] += 1
        state = self.state
        return flat.pack_values([state.get(k) for k in flat.unpack_keys(keys)])

    def put_many(self, entries):
        self.calls["put_many"] += 1
        items = flat.unpack_entries(entries)
        for k, v in items:
            self._check_key(k)
            if v is not None and len(v) > self.max_value_bytes:
                raise LimitExceeded(
                    f"state value of {len(v)} bytes under {k[:64]!r} is over max_value_bytes = {self.max_value_bytes}"
                )
        for k, v in items:
            if v is None:
                self.state.pop(k, None)
            else:
                self.state[k] = v
        total = sum(map(len, self.state)) + sum(map(len, self.state.values()))
        if total > self.max_state_bytes:
            raise LimitExceeded(f"state holds {total} bytes, over max_state_bytes = {self.max_state_bytes}")

    def _check_key(self, k):
        if len(k) > self.max_key_bytes:
            raise LimitExceeded(
                f"state key of {len(k)} bytes is over max_key_bytes = {self.max_key_bytes}"
            )

    def scan(self, prefix, after, limit):
        self.calls["scan"] += 1
        keys = self.state.sorted_keys()
        if after is None or after < prefix:
            start = bisect.bisect_left(keys, prefix)
        else:
            start = bisect.bisect_right(keys, after)
        out = []
        for k in itertools.islice(keys, start, start + limit):
            if not k.startswith(prefix):
                break
            out.append((k, self.state[k]))
        return flat.pack_entries(out)

    def emit(self, port, data, spans):
        self.calls["emit"] += 1
        for r in flat.records(data, spans):
            self.outputs.append((port, r))

    def watermark(self):
        self.calls["watermark"] += 1
        return self.current_watermark

    def processing_time(self):
        self.calls["processing_time"] += 1
        return self.now if self.now is not None else int(time.time() * 1000)

    def register_timer(self, key, domain, time):
        self.calls["register_timer"] += 1
        self._check_key(key)
        self.timers.add((domain, time, bytes(key)))

    def delete_timer(self, key, domain, time):
        self.calls["delete_timer"] += 1
        self.timers.discard((domain, time, bytes(key)))

    def log(self, level, message):
        self.logs.append((level, message))

    def reject(self, index, message):
        self.calls["reject"] += 1
        self.rejected.append((index, message))


class Checkpoint:
    """What a completed checkpoint holds: host state, timers, the
    snapshot bytes and the state version that wrote them."""

    def __init__(self, checkpoint_id, state, timers, snapshot, state_version):
        self.id = checkpoint_id
        self.state = state
        self.timers = timers
        self.snapshot = snapshot
        self.state_version = state_version


def _record(r):
    if isinstance(r, Record):
        return r
    if isinstance(r, (str, bytes, bytearray)):
        return Record(r)
    raise TypeError(f"expected a Record, str or bytes, got {type(r).__name__}")


class Harness:
    """Runs operator class `cls` on a `MemoryHost`, as the host would: opened
    with `config` (a dict, JSON text or None for `{}`), as instance
    `instance` of `parallelism`.

    Every driving method returns what the operator emitted during the call:
    `process`, `advance_watermark`, `advance_processing_time`, `checkpoint`
    and `finish` as a list of `Record` (every port, in order), the
    `..._ports` variants as (port name, `Record`) pairs. Errors the operator
    raises (`weir_sdk.InvalidInput`, ...) propagate.
    """

    def __init__(self, cls, config=None, *, operator_id="op", instance=0, parallelism=1,
                 host=None):
        describe(cls)
        self.cls = cls
        self.config_text = config if isinstance(config, str) else json_text(config or {})
        self.operator_id = operator_id
        self.instance_index = instance
        self.parallelism = parallelism
        self.checkpoints = []
        self._next_checkpoint = 1
        self.host = host or MemoryHost()
        self._open()

    def _open(self):
        self.instance = Instance(self.cls, self.host)
        self.instance.open(self.operator_id, self.instance_index, self.parallelism, self.config_text)

    # ---------------------------------------------------------------- inspect

    @property
    def operator(self):
        """The operator object."""
        return self.instance.op

    @property
    def state(self):
        """Host state: state key (bytes) to value (bytes). Writes still in the
        SDK's cache are not here before a checkpoint or `finish`."""
        return self.host.state

    @property
    def logs(self):
        """(level, message) of every message the operator logged."""
        return self.host.logs

    def take_rejected(self):
        """The records the operator refused (`Context.reject`, `Batch.each`)
        since the last call of this: (index in the batch of its call,
        message)."""
        rejected, self.host.rejected = self.host.rejected, []
        return rejected

    @property
    def host_calls(self):
        """How many times each host function was called, by name."""
        return self.host.calls

    @property
    def watermark(self):
        """The current watermark (None before the first)."""
        return self.host.current_watermark

    def pending_timers(self, domain=TimeDomain.EVENT_TIME):
        """The pending timers of `domain` as (time, key), in firing order."""
        return sorted((t, k) for d, t, k in self.host.timers if d == domain)

    def state_of(self, name):
        """The host state entries of `MapState(name)` as {map key text: value
        bytes}, and of `ValueState(name)` under the key ''."""
        suffix = b"\x00" + name.encode()
        return {
            k[: -len(suffix)].decode("utf-8", "replace"): v
            for k, v in sorted(self.host.state.items())
            if k.endswith(suffix)
        }

    # ----------------------------------------------------------------- drive

    def _take(self, ports):
        out = self.host.outputs
        self.host.outputs = []
        if ports:
            names = self.cls.outputs
            return [(names[p], r) for p, r in out]
        return [r for _, r in out]

    def _input(self, port):
        if isinstance(port, int):
            return port
        try:
            return list(self.cls.inputs).index(port)
        except ValueError:
            raise ValueError(f"no input `{port}`; the operator's inputs are {list(self.cls.inputs)}") from None

    def process(self, port, records, ports=False):
        """Processes `records` (`Record`s, or str/bytes values) arriving on
        input `port` (a name or an index), as one flat batch: rows
        (`Record.of_row`) as rows to an operator that reads them, else as
        the JSON text of their fields, as the host gives them."""
        records = [_record(r) for r in records]
        if not self.cls.reads_rows:
            records = [r.as_text() for r in records]
        data, spans = flat.pack_records(records)
        self.instance.process_flat(self._input(port), data, spans)
        return self._take(ports)

    def process_ports(self, port, records):
        """`process`, with the output port of every record."""
        return self.process(port, records, ports=True)

    def _fire(self, domain, until):
        # A timer registered while timers fire and already due fires in a
        # later call of the same round, as the host does.
        while True:
            due = sorted((t, k) for d, t, k in self.host.timers if d == domain and t <= until)
            if not due:
                return
            for t, k in due:
                self.host.timers.discard((domain, t, k))
            data, spans = flat.pack_records(Record(b"", k, t) for t, k in due)
            first = len(self.host.outputs)
            self.instance.on_timers(domain, data, spans)
            last_time = due[-1][0]
            for i in range(first, len(self.host.outputs)):
                port, r = self.host.outputs[i]
                if r.timestamp is None:
                    r.timestamp = last_time

    def advance_watermark(self, watermark, ports=False):
        """Sets the watermark to `watermark` (it never goes back) and fires
        the event-time timers it makes due."""
        if self.host.current_watermark is not None and watermark < self.host.current_watermark:
            raise ValueError(
                f"the watermark never goes back: {watermark} < {self.host.current_watermark}"
            )
        self.host.current_watermark = watermark
        self._fire(TimeDomain.EVENT_TIME, watermark)
        return self._take(ports)

    def advance_processing_time(self, now, ports=False):
        """Sets the host's clock to `now` and fires the processing-time
        timers due."""
        self.host.now = now
        self._fire(TimeDomain.PROCESSING_TIME, now)
        return self._take(ports)

    def checkpoint(self, checkpoint_id=None, ports=False):
        """Takes checkpoint `checkpoint_id` (default: the next number):
        `on_checkpoint`, then the state, timers and snapshot are kept as
        the checkpoint `restart` resumes from."""
        if checkpoint_id is None:
            checkpoint_id = self._next_checkpoint
        self._next_checkpoint = checkpoint_id + 1
        self.instance.on_checkpoint(checkpoint_id)
        self.checkpoints.append(
            Checkpoint(
                checkpoint_id,
                dict(self.host.state),
                set(self.host.timers),
                self.instance.snapshot(),
                self.cls.state_version,
            )
        )
        return self._take(ports)

    def finish(self, ports=False):
        """End of input: the watermark becomes the end of time (every
        event-time timer fires), `finish`, then the final checkpoint."""
        self.host.current_watermark = END_OF_TIME
        self._fire(TimeDomain.EVENT_TIME, END_OF_TIME)
        self.instance.finish()
        out = self._take(ports)
        return out + self.checkpoint(ports=ports)

    def snapshot(self):
        """The operator's snapshot bytes now."""
        return self.instance.snapshot()

    def restart(self, cls=None):
        """Fails and restarts the instance as the host does: a new operator
        object (of `cls`, e.g. a newer build, default the same class) on the
        last checkpoint's state, timers and snapshot, opened and restored.
        Without a checkpoint it starts empty."""
        if cls is not None:
            describe(cls)
            self.cls = cls
        last = self.checkpoints[-1] if self.checkpoints else None
        host = MemoryHost(self.host.memory, self.host.max_key_bytes, self.host.max_value_bytes,
                          self.host.max_state_bytes)
        if last is not None:
            host.state = State(last.state)
            host.timers = set(last.timers)
        self.host = host
        self._open()
        if last is not None:
            self.instance.restore(last.state_version, last.snapshot)
        return self._take(False)

    def restore(self, state_version, data):
        """Calls `restore` with snapshot bytes `data` of `state_version`."""
        self.instance.restore(state_version, data)


def load_app(test_file):
    """The `app.py` module of the operator package holding `test_file` (the
    nearest folder above it with an `app.py`), imported under a name of its
    own, so that the tests of several packages run in one pytest session:
    `app = load_app(__file__)` in a test module."""
    import importlib.util
    import pathlib
    import sys

    here = pathlib.Path(test_file).resolve().parent
    for folder in (here, *here.parents):
        path = folder / "app.py"
        if path.is_file():
            break
    else:
        raise FileNotFoundError(f"no app.py in {here} or any folder above it")
    name = "weir_app_" + "".join(c if c.isalnum() else "_" for c in str(folder))
    if name in sys.modules:
        return sys.modules[name]
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
