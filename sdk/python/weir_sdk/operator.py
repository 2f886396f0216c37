"""`Operator`: the lifecycle of a stream operator as a class with default
hooks, what a plugin subclasses and exports with `weir_sdk.export`."""

from .errors import IncompatibleState


class Operator:
    """A stream operator. Subclass it, set its description, implement
    `process` (and whatever other hook it needs), then
    `weir_sdk.export(MyOperator, globals())` in the component's `app.py`.

    Class attributes (what `lifecycle.describe` returns):

    - `name`, `version`: the plugin's name and version (semver);
    - `inputs`, `outputs`: port names (default one each, `in` and `out`);
      port numbers passed to hooks and `Context.emit` index these;
    - `state_version`: the version of the state layout (host state and
      snapshot bytes); bump it when the layout changes;
    - `Config`: a dataclass to parse the job's `config` into (else a dict);
    - `reads_rows`: True to receive rows as rows (`Record.is_row`,
      `Record.row()`: typed fields, no JSON to parse) — a `csv` source
      writes them, and operators emit them with `Context.emit_row`;
      records that are text still arrive as text. False (the default):
      every row arrives as the JSON text of its fields.

    Lifecycle on one instance: `open` once, then `restore` when resuming
    from a checkpoint, then any number of `process`, `on_timer` and
    `on_checkpoint` calls, then `finish` at end of input followed by
    `on_checkpoint` for the final checkpoint. Calls are never concurrent.
    """

    name = None
    version = "0.1.0"
    inputs = ("in",)
    outputs = ("out",)
    state_version = 1
    Config = None
    reads_rows = False

    def open(self, ctx):
        """Prepares the instance: `ctx` is an `OpenContext` whose `config`
        is already parsed. Create `MapState` / `ValueState` here."""

    def process(self, ctx, port, batch):
        """Processes a `Batch` of records that arrived on input `port` (an
        index into `inputs`), in arrival order."""
        raise NotImplementedError(f"{type(self).__name__} does not implement process")

    def on_timers(self, ctx, timers):
        """The due timers of one domain, in firing order; calls `on_timer`
        for each. Override it to read their state with one `prefetch`."""
        for timer in timers:
            self.on_timer(ctx, timer)

    def on_timer(self, ctx, timer):
        """A registered timer fired (`timer.key`, `timer.time`,
        `timer.domain`): records emitted without a timestamp get
        `timer.time`. Does nothing by default."""

    def on_checkpoint(self, ctx, checkpoint_id):
        """Right before the instance's state is snapshotted for checkpoint
        `checkpoint_id`: flush buffered work. When it returns the SDK writes
        the state caches back to the host. Does nothing by default."""

    def finish(self, ctx):
        """End of input: every input is closed (every event-time timer has
        fired). Emit final results here. Does nothing by default."""

    def snapshot(self):
        """State kept in the operator's own memory, as bytes saved in the
        checkpoint. The default keeps none."""
        return b""

    def restore(self, ctx, state_version, data):
        """Replaces in-memory state with `data` written by `snapshot` of a
        build whose state version was `state_version` (migrate when it is
        older). Host state is already restored. The default accepts only
        empty bytes."""
        if data:
            raise IncompatibleState(
                f"this operator keeps no in-memory state but got {len(data)} snapshot bytes "
                f"(state version {state_version}); implement Operator.restore"
            )
