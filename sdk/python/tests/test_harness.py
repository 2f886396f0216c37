"""The harness's host: timers, watermarks, checkpoints, snapshots, errors,
logs; and the description checks."""

import json
import logging

import pytest

import weir_sdk
from weir_sdk import END_OF_TIME, Change, InvalidInput, Operator, Record, TimeDomain
from weir_sdk.testing import Harness


class Later(Operator):
    """Emits each key when event time passes its record's time + 10, and
    once more 5 later (a timer registered by a timer)."""

    name = "later"
    outputs = ["out", "side"]

    def process(self, ctx, port, batch):
        for rec in batch:
            if rec.timestamp is None:
                raise InvalidInput(f"record {rec.value!r} has no timestamp")
            ctx.register_event_timer(rec.key, rec.timestamp + 10)
            ctx.emit("seen", rec.key, port="side")

    def on_timer(self, ctx, timer):
        ctx.emit(f"fired {timer.key_str()} at {timer.time} (wm {ctx.watermark})", timer.key)
        if timer.time % 10 == 0:
            ctx.register_event_timer(timer.key, timer.time + 5)
            ctx.register_event_timer(timer.key, timer.time - 1)  # due already


def test_event_timers_fire_in_time_order_then_key_order_with_their_time():
    h = Harness(Later)
    side = h.process_ports("in", [Record("", key="b", timestamp=0), Record("", key="a", timestamp=0)])
    assert side == [("side", Record("seen", key="b", timestamp=0)), ("side", Record("seen", key="a", timestamp=0))]
    assert h.pending_timers() == [(10, b"a"), (10, b"b")]
    assert h.advance_watermark(9) == []
    out = h.advance_watermark(12)
    assert [(r.value, r.timestamp) for r in out] == [
        (b"fired a at 10 (wm 12)", 10),
        (b"fired b at 10 (wm 12)", 10),
        # registered by the timers above and already due: a later call
        (b"fired a at 9 (wm 12)", 9),
        (b"fired b at 9 (wm 12)", 9),
    ]
    assert h.pending_timers() == [(15, b"a"), (15, b"b")]
    with pytest.raises(ValueError, match="never goes back"):
        h.advance_watermark(11)


def test_finish_fires_every_event_timer_and_takes_the_final_checkpoint():
    h = Harness(Later)
    h.process("in", [Record("", key="k", timestamp=100)])
    out = h.finish()
    assert [r.value for r in out][:2] == [
        f"fired k at 110 (wm {END_OF_TIME})".encode(),
        f"fired k at 109 (wm {END_OF_TIME})".encode(),
    ]
    assert h.pending_timers() == []
    assert len(h.checkpoints) == 1


def test_pending_timers_survive_a_restart_from_a_checkpoint():
    h = Harness(Later)
    h.process("in", [Record("", key="k", timestamp=0)])
    h.checkpoint()
    h.process("in", [Record("", key="j", timestamp=0)])  # lost
    h.restart()
    assert h.pending_timers() == [(10, b"k")]
    assert [r.value for r in h.advance_watermark(10)] == [
        b"fired k at 10 (wm 10)",
        b"fired k at 9 (wm 10)",
    ]


def test_errors_propagate_as_their_exception():
    h = Harness(Later)
    with pytest.raises(InvalidInput, match="has no timestamp"):
        h.process("in", [Record("x")])


class Buffered(Operator):
    """Keeps records in memory until a checkpoint; snapshots them."""

    name = "buffered"
    state_version = 2

    def open(self, ctx):
        self.pending = []
        weir_sdk.log.info(f"open {ctx.operator_id}[{ctx.instance}/{ctx.parallelism}]")

    def process(self, ctx, port, batch):
        self.pending.extend(r.value.decode() for r in batch)
        logging.getLogger("weir.buffered").warning("buffered %d", len(self.pending))

    def on_checkpoint(self, ctx, checkpoint_id):
        for v in self.pending[:1]:
            ctx.emit(v)
        self.pending = self.pending[1:]

    def on_timer(self, ctx, timer):
        ctx.emit(f"tick {timer.time} {timer.domain.value}")

    def snapshot(self):
        return json.dumps(self.pending).encode()

    def restore(self, ctx, state_version, data):
        assert state_version == 2
        self.pending = json.loads(data)


def test_snapshots_round_trip_through_restart():
    h = Harness(Buffered, operator_id="buf", instance=1, parallelism=3)
    h.process("in", ["a", "b", "c"])
    assert [r.value for r in h.checkpoint()] == [b"a"]
    h.restart()
    assert h.operator.pending == ["b", "c"]
    assert h.snapshot() == b'["b", "c"]'
    assert [r.value for r in h.checkpoint()] == [b"b"]
    assert h.checkpoints[-1].id == 2


def test_logs_reach_the_host_from_weir_sdk_log_and_logging():
    h = Harness(Buffered, operator_id="buf", instance=1, parallelism=3)
    h.process("in", ["a"])
    assert h.logs == [("info", "open buf[1/3]"), ("warn", "buffered 1")]


def test_processing_time_timers_fire_when_the_clock_reaches_them():
    class Clock(Buffered):
        def process(self, ctx, port, batch):
            ctx.register_processing_timer(b"", 1000)

    h = Harness(Clock)
    h.process("in", ["a"])
    assert h.advance_processing_time(999) == []
    assert h.advance_processing_time(1000) == [Record("tick 1000 processing-time", timestamp=1000)]
    assert h.pending_timers(TimeDomain.PROCESSING_TIME) == []


def test_the_default_restore_refuses_snapshot_bytes():
    h = Harness(Later)
    h.restore(1, b"")
    with pytest.raises(weir_sdk.IncompatibleState, match="implement Operator.restore"):
        h.restore(1, b"x")


def test_descriptions_are_checked():
    class NoName(Operator):
        pass

    class BadPorts(Operator):
        name = "bad"
        inputs = "in"

    with pytest.raises(TypeError, match="name"):
        Harness(NoName)
    with pytest.raises(TypeError, match="inputs"):
        Harness(BadPorts)


def test_emit_to_an_unknown_port_says_which_ports_exist():
    class Wrong(Operator):
        name = "wrong"

        def process(self, ctx, port, batch):
            ctx.emit("x", port="nope")

    with pytest.raises(ValueError, match=r"outputs are \['out'\]"):
        Harness(Wrong).process("in", ["a"])


class Amounts(Operator):
    """Sums numeric values; `each` refuses the records that are not
    numbers, while the rest of the batch counts."""

    name = "amounts"

    def open(self, ctx):
        self.total = 0.0

    def process(self, ctx, port, batch):
        def add(rec):
            self.total += float(rec.value_str())
            ctx.emit(str(self.total))

        batch.each(add, refuse=(InvalidInput, ValueError))


def test_each_refuses_the_records_that_raise_and_keeps_the_others():
    h = Harness(Amounts)
    assert h.process("in", ["1", "x", "2", "", "3"]) == [Record("1.0"), Record("3.0"), Record("6.0")]
    rejected = h.take_rejected()
    assert [i for i, _ in rejected] == [1, 3]
    assert rejected[0][1] == "ValueError: could not convert string to float: 'x'"
    assert h.take_rejected() == []


class Picky(Operator):
    """Refuses the records it is told to by index; raises what `each` does
    not refuse."""

    name = "picky"

    def process(self, ctx, port, batch):
        for i, rec in enumerate(batch):
            if rec.value_str() == "bad":
                ctx.reject(i, f"record {i} is bad")
        batch.each(lambda rec: int(rec.value_str()) if rec.value_str() == "boom" else None)


def test_reject_names_the_record_and_other_errors_still_fail_the_call():
    h = Harness(Picky)
    assert h.process("in", ["ok", "bad", "ok"]) == []
    assert h.take_rejected() == [(1, "record 1 is bad")]
    with pytest.raises(ValueError):
        h.process("in", ["boom"])


class Negate(Operator):
    """Forwards each record, turning inserts into deletes and back."""

    name = "negate"

    def process(self, ctx, port, batch):
        for rec in batch:
            flipped = {Change.INSERT: Change.DELETE, Change.DELETE: Change.INSERT}
            ctx.emit(rec.value, rec.key, change=flipped.get(rec.change, rec.change))
            ctx.emit_record(rec, port=0)


def test_operators_see_and_emit_change_kinds():
    h = Harness(Negate)
    out = h.process(
        "in",
        [Record("a", key="k"), Record("b", change=Change.DELETE), Record("c", change=Change.TRUNCATE)],
    )
    assert [(r.value, r.change) for r in out] == [
        (b"a", Change.DELETE),
        (b"a", Change.INSERT),
        (b"b", Change.INSERT),
        (b"b", Change.DELETE),
        (b"c", Change.TRUNCATE),
        (b"c", Change.TRUNCATE),
    ]
