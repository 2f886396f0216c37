"""The component's side: the classes componentize-py exports for world
`operator-rows` (wit/world.wit), dispatching to an `Instance` of the
operator over the real host imports.

`weir_sdk.export(cls, globals())` in `app.py` defines them in the app
module. In plain CPython (tests, the harness) there are no bindings
(`wit_world`), and `export` defines nothing.
"""

from .errors import Error
from .record import TimeDomain
from .runtime import Instance, describe


def export(cls, namespace):
    """Makes operator class `cls` the component's operator: defines
    `Lifecycle`, `FlatLifecycle`, `ChangeLifecycle`, `TimerLifecycle`, `RowInput` and `Snapshot` in
    `namespace` (the app module's `globals()`). Returns whether it did,
    i.e. whether this runs inside a component build."""
    describe(cls)
    try:
        import wit_world.exports  # noqa: F401 (only inside componentize-py)
    except ImportError:
        return False
    namespace.update(_exports(cls))
    return True


def _exports(cls):
    import wit_world.exports as exports
    from componentize_py_types import Err
    from wit_world.imports import flat, flat_state, log, timers, types
    from wit_world.imports import reject as refuse

    errors = {
        "invalid-config": types.Error_InvalidConfig,
        "invalid-input": types.Error_InvalidInput,
        "incompatible-state": types.Error_IncompatibleState,
        "other": types.Error_Other,
    }
    to_wit = {
        TimeDomain.EVENT_TIME: timers.TimeDomain.EVENT_TIME,
        TimeDomain.PROCESSING_TIME: timers.TimeDomain.PROCESSING_TIME,
    }
    from_wit = {v: k for k, v in to_wit.items()}
    levels = {
        "trace": log.Level.TRACE,
        "debug": log.Level.DEBUG,
        "info": log.Level.INFO,
        "warn": log.Level.WARN,
        "error": log.Level.ERROR,
    }

    class Host:
        """The component's imports."""

        get_many = staticmethod(flat_state.get_many)
        put_many = staticmethod(flat_state.put_many)
        scan = staticmethod(flat_state.scan)
        emit = staticmethod(flat.emit)
        watermark = staticmethod(timers.current_watermark)
        processing_time = staticmethod(timers.processing_time)
        reject = staticmethod(refuse.reject)

        @staticmethod
        def limits():
            lim = flat_state.limits()
            return (lim.memory, lim.max_key_bytes, lim.max_value_bytes, lim.max_state_bytes)

        @staticmethod
        def register_timer(key, domain, time):
            timers.register_timer(key, to_wit[domain], time)

        @staticmethod
        def delete_timer(key, domain, time):
            timers.delete_timer(key, to_wit[domain], time)

        @staticmethod
        def log(level, message):
            log.log(levels[level], message)

    # One operator instance per component instance.
    instance = Instance(cls, Host())
    name, version, inputs, outputs, state_version = describe(cls)

    def call(f, *args):
        try:
            return f(*args)
        except Error as e:
            raise Err(errors[e.kind](e.message)) from None

    class Lifecycle(exports.Lifecycle):
        def describe(self):
            return types.OperatorInfo(
                name=name,
                version=version,
                inputs=inputs,
                outputs=outputs,
                state_version=state_version,
            )

        def open(self, ctx):
            call(instance.open, ctx.operator_id, ctx.instance, ctx.parallelism, ctx.config)

        def process(self, port, batch):
            call(instance.process_records, port, batch)

        def on_checkpoint(self, checkpoint_id):
            call(instance.on_checkpoint, checkpoint_id)

        def finish(self):
            call(instance.finish)

    class FlatLifecycle(exports.FlatLifecycle):
        def process(self, port, data, spans):
            call(instance.process_flat, port, data, spans)

    class TimerLifecycle(exports.TimerLifecycle):
        def on_timers(self, domain, data, spans):
            call(instance.on_timers, from_wit[domain], data, spans)

    class Snapshot(exports.Snapshot):
        def snapshot(self):
            return instance.snapshot()

        def restore(self, state_version, data):
            call(instance.restore, state_version, data)

    defined = {
        "Lifecycle": Lifecycle,
        "FlatLifecycle": FlatLifecycle,
        "TimerLifecycle": TimerLifecycle,
        "Snapshot": Snapshot,
    }
    # Worlds from `operator-changes` on have it; an app built against an
    # older world does not.
    if hasattr(exports, "ChangeLifecycle"):

        class ChangeLifecycle(exports.ChangeLifecycle):
            def process(self, port, data, spans):
                call(instance.process_flat, port, data, spans)

        defined["ChangeLifecycle"] = ChangeLifecycle
    # World `operator-rows` (the default) has it.
    if hasattr(exports, "RowInput"):
        reads_rows = bool(getattr(cls, "reads_rows", False))

        class RowInput(exports.RowInput):
            def reads_rows(self):
                return reads_rows

        defined["RowInput"] = RowInput
    return defined
