"""MapState and ValueState: the Rust SDK's layout and encoding, the cache
and its write-back rules."""

import json
from dataclasses import dataclass

import pytest

from weir_sdk import IncompatibleState, MapState, Operator, Record, ValueState
from weir_sdk.testing import Harness, MemoryHost


@dataclass
class Point:
    x: float
    y: float = 0.0


class Counter(Operator):
    """Counts records per key (value), keeps a total and the last point."""

    name = "counter"

    def open(self, ctx):
        self.counts = MapState("count")
        self.by_id = MapState("by-id", key=int)
        self.points = MapState("point", value=Point)
        self.total = ValueState("total")

    def process(self, ctx, port, batch):
        keys = [r.value.decode() for r in batch.records]
        self.counts.prefetch(keys)
        for k in keys:
            if k.startswith("-"):
                del self.counts[k[1:]]
                continue
            n = self.counts.get(k, 0) + 1
            self.counts[k] = n
            self.by_id[n] = k
            self.points[k] = Point(n / 2)
            ctx.emit(str(n), k)
        self.total.update(lambda t: t + len(keys), 0)


def test_state_keys_and_values_have_the_rust_sdk_layout():
    h = Harness(Counter)
    h.process("in", ["hello", "hello", "ü"])
    h.checkpoint()
    assert h.state == {
        b"hello\x00count": b"2",
        b"\xc3\xbc\x00count": b"1",
        b"1\x00by-id": b'"\xc3\xbc"',
        b"2\x00by-id": b'"hello"',
        b"hello\x00point": b'{"x":1.0,"y":0.0}',
        b"\xc3\xbc\x00point": b'{"x":0.5,"y":0.0}',
        b"\x00total": b"3",
    }


def test_writes_reach_the_host_at_checkpoints_not_per_batch():
    h = Harness(Counter)
    for _ in range(3):
        h.process("in", ["a", "b", "a"])
    assert h.state == {}
    assert h.host_calls["put_many"] == 0
    # One read of the batch's misses per batch while they are not cached.
    assert h.host_calls["get_many"] <= 4 + 3
    h.checkpoint()
    assert h.state[b"a\x00count"] == b"6"
    assert h.host_calls["put_many"] == 1


def test_deleted_keys_are_deleted_in_the_host():
    h = Harness(Counter)
    h.process("in", ["a", "b"])
    h.checkpoint()
    h.process("in", ["-a"])
    h.checkpoint()
    assert b"a\x00count" not in h.state and h.state[b"b\x00count"] == b"1"


def test_a_restart_resumes_from_the_last_checkpoint_only():
    h = Harness(Counter)
    h.process("in", ["a"])
    h.checkpoint()
    h.process("in", ["a", "a"])  # not checkpointed: lost on restart
    h.restart()
    assert [r.value for r in h.process("in", ["a"])] == [b"2"]


def test_items_lists_one_map_in_key_order():
    h = Harness(Counter)
    h.process("in", ["b", "a", "b"])
    op = h.operator
    seen = []

    class Lister(Counter):
        def finish(self, ctx):
            seen.extend(self.counts.items())
            seen.extend(self.by_id.items())

    h.restart(Lister)
    assert seen == []
    h.process("in", ["b", "a", "b"])
    h.finish()
    assert seen == [("a", 1), ("b", 2), (1, "a"), (2, "b")]
    assert op is not h.operator


def test_a_value_that_does_not_decode_is_incompatible_state():
    h = Harness(Counter)
    h.state[b"x\x00count"] = b"{not json"
    with pytest.raises(IncompatibleState, match="state `count`"):
        h.process("in", ["x"])


def test_the_cache_stays_within_its_budget_and_loses_nothing():
    # 1 MiB of memory: a budget of 128 KiB, far below 5,000 keys' worth.
    h = Harness(Counter, host=MemoryHost(memory=1 << 20))
    for i in range(50):
        h.process("in", [f"k{(i * 97 + j) % 5000}" for j in range(100)])
        store = h.instance.store
        assert store.entries * store.entry_bytes() <= store.budget
    h.checkpoint()
    counts = {k: int(v) for k, v in h.state_of("count").items()}
    expected = {}
    for i in range(50):
        for j in range(100):
            k = f"k{(i * 97 + j) % 5000}"
            expected[k] = expected.get(k, 0) + 1
    assert counts == expected
    assert h.host_calls["put_many"] > 1  # written back before the checkpoint


def test_dirty_entries_over_the_dirty_limit_are_written_back_when_a_hook_returns():
    h = Harness(Counter)
    store = h.instance.store
    store.set_budget(400 * store.entry_bytes())  # dirty limit: 100 entries
    h.process("in", [f"k{i}" for i in range(30)])
    assert h.host_calls["put_many"] == 0
    h.process("in", [f"j{i}" for i in range(30)])
    assert h.host_calls["put_many"] == 1
    assert h.state[b"k0\x00count"] == b"1"
    # Still cached: no read of them again.
    reads = h.host_calls["get_many"]
    h.process("in", ["k0", "j0"])
    assert h.host_calls["get_many"] == reads


def test_a_state_name_opened_twice_is_refused():
    class Twice(Operator):
        name = "twice"

        def open(self, ctx):
            MapState("x")
            ValueState("x")

    with pytest.raises(ValueError, match="opened twice"):
        Harness(Twice)


def test_state_outside_a_hook_says_where_to_create_it():
    with pytest.raises(RuntimeError, match="Operator.open"):
        MapState("x")


def test_records_emitted_while_a_batch_is_iterated_keep_their_timestamps():
    class Echo(Operator):
        name = "echo"

        def process(self, ctx, port, batch):
            for rec in batch:
                ctx.emit(rec.value.upper(), rec.value)
            ctx.emit("last")
            ctx.emit("none", timestamp=None)

        def finish(self, ctx):
            ctx.emit("end")

    h = Harness(Echo)
    out = h.process("in", [Record("a", timestamp=7), Record("b")])
    assert out == [
        Record("A", key="a", timestamp=7),
        Record("B", key="b"),
        Record("last"),
        Record("none"),
    ]
    out = h.process("in", [Record("c", timestamp=3)])
    assert out[1] == Record("last", timestamp=3)
    assert h.finish() == [Record("end")]


def test_a_cache_without_budget_still_reads_and_writes_correctly():
    # Every new entry overflows the budget: each read is evicted at once
    # and each write is written back at once; nothing is lost.
    h = Harness(Counter)
    h.instance.store.set_budget(0)
    out = h.process("in", ["a", "b", "a", "-b", "b"])
    assert [r.value for r in out] == [b"1", b"1", b"2", b"1"]
    assert h.instance.store.entries == 0
    h.checkpoint()
    assert h.state_of("count") == {"a": b"2", "b": b"1"}

    class Many(Counter):
        def finish(self, ctx):
            ctx.emit(repr(self.counts.get_many(["a", "b", "c"], 0)))

    h.restart(Many)
    h.instance.store.set_budget(0)
    assert h.finish()[0].value == b"[2, 1, 0]"


def test_raw_state_sees_typed_writes_and_typed_state_sees_raw_writes():
    class Raw(Counter):
        def finish(self, ctx):
            # A typed write not yet written back is seen by a raw read.
            self.counts["a"] = 10
            assert ctx.get(b"a\x00count") == b"10"
            # A raw write is seen by the typed read of a cached key.
            ctx.put(b"a\x00count", b"11")
            assert self.counts.get("a") == 11
            ctx.delete("b\x00count")
            assert self.counts.get("b") is None
            assert [k for k, _ in ctx.scan(prefix=b"a")] == [b"a\x00count", b"a\x00point"]
            assert len(list(ctx.scan_all())) == 5

    h = Harness(Raw)
    h.process("in", ["a", "b"])
    h.finish()
    assert h.state_of("count") == {"a": b"11"}


def test_restore_can_migrate_host_state_through_raw_access():
    class V1(Operator):
        name = "m"
        state_version = 1

        def open(self, ctx):
            self.names = MapState("name")

        def process(self, ctx, port, batch):
            for r in batch.records:
                self.names[r.value.decode()] = r.value.decode()  # JSON strings

    class V2(V1):
        state_version = 2

        def open(self, ctx):
            self.names = MapState("name", value=UpperCodec)

        def restore(self, ctx, state_version, data):
            if state_version < 2:
                old = [(k, v) for k, v in ctx.scan_all() if k.endswith(b"\x00name")]
                for k, v in old:
                    ctx.put(k, json.loads(v).upper())

    class UpperCodec:
        encode = staticmethod(str.encode)
        decode = staticmethod(lambda b: b.decode())

    h = Harness(V1)
    h.process("in", ["ada", "grace"])
    h.checkpoint()
    h.restart(V2)
    assert h.operator.names.get("ada") == "ADA"
    h.checkpoint()
    assert h.state_of("name") == {"ada": b"ADA", "grace": b"GRACE"}
