"""One operator instance driven through the WIT lifecycle against a host:
what the component's exports (`weir_sdk.component`) and the test harness
(`weir_sdk.testing`) both call, so an operator runs the same code in
either.

A host is an object with the methods of the imports, in packed form:
`get_many(keys) -> bytes`, `put_many(entries)`, `scan(prefix, after,
limit) -> bytes`, `limits() -> (memory, max_key, max_value, max_state)`,
`emit(port, data, spans)`, `watermark()`, `processing_time()`,
`register_timer(key, domain, time)`, `delete_timer(key, domain, time)` and
`log(level, message)` (see wit/ and `weir_sdk.testing.MemoryHost`).

Invariant: a hook runs with its instance active (`active()`), and when it
returns without raising, every record it emitted has reached the host and
the state caches are within their bounds; after `on_checkpoint` and
`finish`, every state write has reached the host.
"""

from . import config as config_mod
from . import flat
from .context import Batch, Context, OpenContext, Timers
from .errors import OperatorError
from .record import Record, Timer
from .state import Store

_active = []


def active():
    """The instance whose hook is running."""
    if not _active:
        raise RuntimeError(
            "no operator hook is running: create MapState and ValueState in Operator.open"
        )
    return _active[-1]


def describe(cls):
    """The checked description of operator class `cls`: (name, version,
    inputs, outputs, state_version)."""
    name = cls.name
    if not isinstance(name, str) or not name:
        raise TypeError(f"{cls.__name__}.name must be the plugin's name, e.g. name = \"my-operator\"")
    if not isinstance(cls.version, str) or not cls.version:
        raise TypeError(f"{cls.__name__}.version must be a version string, e.g. \"0.1.0\"")
    for attr in ("inputs", "outputs"):
        ports = getattr(cls, attr)
        if isinstance(ports, str) or not all(isinstance(p, str) and p for p in ports):
            raise TypeError(f"{cls.__name__}.{attr} must be a list of port names, e.g. [\"in\"]")
        if len(set(ports)) != len(ports):
            raise TypeError(f"{cls.__name__}.{attr} names a port twice: {list(ports)}")
    if not isinstance(cls.state_version, int) or not 0 <= cls.state_version < 2**32:
        raise TypeError(f"{cls.__name__}.state_version must be an integer in 0..2^32")
    if getattr(cls, "reads_rows", False) not in (True, False):
        raise TypeError(f"{cls.__name__}.reads_rows must be True or False")
    return name, cls.version, list(cls.inputs), list(cls.outputs), cls.state_version


class Instance:
    """An instance of operator class `cls` on `host`."""

    def __init__(self, cls, host):
        describe(cls)
        self.cls = cls
        self.host = host
        self.op = None
        self.store = None
        self.ctx = None

    def _hook(self, call, write_back=False):
        """Runs `call()` as a hook of this instance and returns its result:
        active while it runs, its emits handed to the host and the caches
        bounded when it returns, every state write handed over too with
        `write_back`. Nothing of that when it raises: the attempt fails."""
        _active.append(self)
        self.ctx.timestamp = None
        try:
            result = call()
            self.ctx.flush()
            if write_back:
                self.store.write_back()
            self.store.after_hook()
            return result
        finally:
            _active.pop()

    def open(self, operator_id, instance, parallelism, config_text):
        cls = self.cls
        config = config_mod.parse(config_text, cls.Config)
        self.store = Store(self.host)
        self.ctx = Context(self.host, cls.outputs, self.store)
        self.op = cls()
        ctx = OpenContext(operator_id, instance, parallelism, config, config_text)
        self._hook(lambda: self.op.open(ctx))

    def _check_port(self, port):
        if not 0 <= port < len(self.cls.inputs):
            raise OperatorError(f"no input port {port}; the operator has {len(self.cls.inputs)} inputs")

    def process_flat(self, port, data, spans):
        self._check_port(port)
        batch = Batch(flat.records(data, spans), self.ctx)
        self._hook(lambda: self.op.process(self.ctx, port, batch))

    def process_records(self, port, records):
        """The list form: `records` of objects with key, value, timestamp."""
        self._check_port(port)
        batch = Batch([Record(r.value, r.key, r.timestamp) for r in records], self.ctx)
        self._hook(lambda: self.op.process(self.ctx, port, batch))

    def on_timers(self, domain, data, spans):
        timers = [Timer(r.key or b"", r.timestamp, domain) for r in flat.records(data, spans)]
        self._hook(lambda: self.op.on_timers(self.ctx, Timers(timers, self.ctx)))

    def on_checkpoint(self, checkpoint_id):
        self._hook(lambda: self.op.on_checkpoint(self.ctx, checkpoint_id), write_back=True)

    def finish(self):
        self._hook(lambda: self.op.finish(self.ctx), write_back=True)

    def snapshot(self):
        data = self._hook(self.op.snapshot)
        if not isinstance(data, (bytes, bytearray)):
            raise TypeError(f"{self.cls.__name__}.snapshot must return bytes")
        return bytes(data)

    def restore(self, state_version, data):
        self._hook(lambda: self.op.restore(self.ctx, state_version, data))
