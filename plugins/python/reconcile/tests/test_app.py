"""reconcile on the harness: what plugins/reconcile (Rust) does."""

import json
import math
import random
import struct

import pytest

import weir_sdk
from weir_sdk import IncompatibleState, InvalidConfig, InvalidInput, Record
from weir_sdk.testing import Harness, load_app

app = load_app(__file__)


def order(key, amount, ts=None):
    return Record(json.dumps({"key": key, "amount": amount}), timestamp=ts)


def values(out):
    """Emitted records as a sink reads them."""
    return [json.loads(r.as_text().value) for r in out]


def test_keys_on_both_sides_match_or_mismatch_at_once():
    h = Harness(app.Reconcile, {"tolerance": 0.5})
    assert h.process("a", [order("k1", "10.0"), order("k2", 5), order("k3", 1)]) == []
    out = h.process("b", [order("k1", 10.2), order("k2", "7"), order("k2", 5)])
    assert values(out) == [
        {"key": "k1", "status": "MATCH", "a": 10.0, "b": 10.2},
        {"key": "k2", "status": "AMOUNT_MISMATCH", "a": 5.0, "b": 7.0},
    ]
    assert out[0].as_text().value == b'{"key":"k1","status":"MATCH","a":10.0,"b":10.2}'
    # One-sided keys at the end; keys already emitted are ignored.
    out = h.finish()
    assert values(out) == [{"key": "k3", "status": "ONLY_A", "a": 1.0, "b": None}]
    assert h.state[b"k1\x00rc"] == b"\xff\x02\x04done"


def test_state_is_the_rust_builds_layout_and_continues_from_it():
    assert app.Reconcile.state_version == 2
    h = Harness(app.Reconcile)
    h.process("a", [order("k", 12.5), order("j", 1)])
    h.checkpoint()
    # State version 2: FF, then `a` as an f64 (type 5, name length 1, "a").
    assert h.state[b"k\x00rc"] == bytes.fromhex("ff 05 01 61 00 00 00 00 00 00 29 40")
    assert values(h.process("b", [order("k", 12.5)])) == [{"key": "k", "status": "MATCH", "a": 12.5, "b": 12.5}]
    h.checkpoint()
    assert h.state[b"k\x00rc"] == bytes.fromhex("ff 02 04 64 6f 6e 65")
    # A version 1 checkpoint (JSON) continues.
    h = Harness(app.Reconcile)
    h.state[b"k\x00rc"] = b'{"b":2.0}'
    h.state[b"d\x00rc"] = b'{"done":true}'
    out = h.process("a", [order("k", 2), order("d", 1)])
    assert values(out) == [{"key": "k", "status": "MATCH", "a": 2.0, "b": 2.0}]
    h.checkpoint()
    assert h.state[b"k\x00rc"] == b"\xff\x02\x04done"
    assert h.state[b"d\x00rc"] == b'{"done":true}'  # unchanged: not written again


def test_timeout_emits_one_sided_keys_when_the_watermark_passes_and_routes_late_records():
    h = Harness(app.Reconcile, {"timeout": "10ms"})
    h.process("a", [order("x", 1, ts=100), order("y", 2, ts=105)])
    out = h.process_ports("b", [order("y", 2, ts=107)])
    assert [(p, r.timestamp) for p, r in out] == [("out", 107)]
    assert h.pending_timers() == [(110, b"x"), (125, b"y")]
    out = h.advance_watermark(110)
    assert values(out) == [{"key": "x", "status": "ONLY_A", "a": 1.0, "b": None}]
    assert out[0].timestamp == 110
    late = h.process_ports("b", [order("x", 1, ts=111)])
    assert [p for p, _ in late] == ["late"] and late[0][1].timestamp == 111
    # Tombstones are dropped at first timestamp + 2 x timeout.
    h.advance_watermark(125)
    h.checkpoint()
    assert h.state == {}
    assert h.pending_timers() == []


def test_a_record_without_timestamp_under_timeout_is_invalid_input():
    h = Harness(app.Reconcile, {"timeout": 5})
    with pytest.raises(InvalidInput, match="has no timestamp"):
        h.process("a", [order("x", 1)])


@pytest.mark.parametrize(
    "config, message",
    [
        ({"tolerance": -1}, "`tolerance` must be >= 0"),
        ({"tolerance": "1"}, "`tolerance`: expected a number"),
        ({"timeout": "soon"}, "is not a duration"),
        ({"timeout": 0}, "longer than 0ms"),
        ({"key_field": 3}, "`key_field`: expected a string"),
        ({"tolerence": 1}, "unknown field `tolerence`"),
    ],
)
def test_bad_config_names_the_field(config, message):
    with pytest.raises(InvalidConfig, match=message):
        Harness(app.Reconcile, config)


def test_bad_records_change_nothing():
    h = Harness(app.Reconcile)
    with pytest.raises(InvalidInput, match="`amount` is not a number"):
        h.process("a", [order("k", 1), order("j", "many")])
    with pytest.raises(InvalidInput, match="no key and no `key` field"):
        h.process("a", [Record('{"amount": 1}')])
    h.finish()
    assert h.state == {}


def test_keys_from_a_field_of_another_type_are_json():
    h = Harness(app.Reconcile, {"key_field": "id"})
    h.process("a", [Record('{"id": 7, "amount": 1}')])
    out = h.process("b", [Record('{"id": 7, "amount": 1}')])
    assert out[0].key == b"7"


def test_orders_as_rows_reconcile_as_their_json_does():
    """Rows, as a `csv` source with typed `columns` writes them, give what
    the same orders as JSON text give; the operator reads both."""
    from decimal import Decimal

    def row(key, amount, **more):
        return Record.of_row({"order_no": "x", "key": key, "amount": amount, **more})

    as_rows = [
        [row("d", Decimal("10.50")), row("i", 3), row("u", 2**64 - 1), row("f", 0.25), row("s", "7")],
        [row("d", Decimal("10.5")), row("i", "4"), row("u", 2.0**64), row("f", Decimal("25e-2"))],
    ]
    as_text = [[r.as_text() for r in batch] for batch in as_rows]
    outputs = []
    for batches in (as_rows, as_text, [as_rows[0], as_text[1]]):
        h = Harness(app.Reconcile)
        out = h.process("a", batches[0]) + h.process("b", batches[1]) + h.finish()
        outputs.append([r.as_text().value for r in out])
    assert outputs[0] == outputs[1] == outputs[2]
    assert [json.loads(v) for v in outputs[0]] == [
        {"key": "d", "status": "MATCH", "a": 10.5, "b": 10.5},
        {"key": "i", "status": "AMOUNT_MISMATCH", "a": 3.0, "b": 4.0},
        {"key": "u", "status": "MATCH", "a": 2.0**64, "b": 2.0**64},
        {"key": "f", "status": "MATCH", "a": 0.25, "b": 0.25},
        {"key": "s", "status": "ONLY_A", "a": 7.0, "b": None},
    ]


@pytest.mark.parametrize(
    "fields, why",
    [
        ({"key": "k", "amount": float("nan")}, r"`amount` is not a number: null"),
        ({"key": "k", "amount": True}, r"`amount` is not a number: true"),
        ({"key": "k", "amount": "ten"}, r'`amount` is not a number: "ten"'),
        ({"key": "k"}, r'record has no `amount`: \{"key":"k"\}'),
        ({"key": float("inf"), "amount": 1}, r"record has no key and no `key` field"),
    ],
)
def test_a_row_that_is_no_order_is_refused_as_its_json_would_be(fields, why):
    rec = Record.of_row(fields)
    for given in (rec, rec.as_text()):
        with pytest.raises(InvalidInput, match=why):
            Harness(app.Reconcile).process("a", [given])


@pytest.mark.parametrize("text", ["0", "-0", "12", "-7", "12.50", "1e5", "-2E-3", "1e400", "123456789012345678901234567890"])
def test_a_rows_decimal_reads_as_its_json_number(text):
    got, want = app._parse_decimal(text), app._parse_json(text.encode())
    assert (type(got), got, math.copysign(1, got) if isinstance(got, float) else 0) == (
        type(want), want, math.copysign(1, want) if isinstance(want, float) else 0
    )


# ------------------------------------------------- state version 2: rows


def spec_row(a=None, b=None, done=False, t=None):
    """The row value docs (row-values spec, reconcile v2) lay out: 0xFF,
    then each field present, in this order."""
    out = b"\xff"
    if a is not None:
        out += b"\x05\x01a" + struct.pack("<d", a)
    if b is not None:
        out += b"\x05\x01b" + struct.pack("<d", b)
    if done:
        out += b"\x02\x04done"
    if t is not None:
        out += b"\x03\x01t" + struct.pack("<q", t)
    return out


def fields(p):
    """A Pending's fields, floats by their bits."""
    bits = lambda x: None if x is None else struct.pack("<d", x)
    return (bits(p.a), bits(p.b), p.done, p.t)


AMOUNTS = [12.5, 0.0, -0.0, 1e-310, -1234.56, math.inf, -math.inf, math.nan,
           struct.unpack("<d", bytes.fromhex("010000000000f8ff"))[0]]
TIMES = [0, 1, -1, 1_700_000_000_000, 2**63 - 1, -(2**63)]


def test_the_spec_s_examples_byte_for_byte():
    enc = app.PendingCodec.encode
    assert enc(app.Pending(a=12.5)) == bytes.fromhex("ff 05 01 61 00 00 00 00 00 00 29 40")
    assert enc(app.Pending(done=True)) == bytes.fromhex("ff 02 04 64 6f 6e 65")
    assert enc(app.Pending(b=1.0, t=5)) == bytes.fromhex(
        "ff 05 01 62 00 00 00 00 00 00 f0 3f 03 01 74 05 00 00 00 00 00 00 00"
    )
    assert enc(app.Pending(done=True, t=-1)) == bytes.fromhex("ff 02 04 64 6f 6e 65 03 01 74" + "ff" * 8)
    assert enc(app.Pending()) == b"\xff"


def test_every_shape_is_written_as_the_spec_says_and_reads_back():
    rng = random.Random(2)
    for _ in range(4000):
        p = app.Pending(
            rng.choice(AMOUNTS) if rng.random() < 0.6 else None,
            rng.choice(AMOUNTS) if rng.random() < 0.6 else None,
            rng.random() < 0.5,
            rng.choice(TIMES) if rng.random() < 0.5 else None,
        )
        data = app.PendingCodec.encode(p)
        assert data == spec_row(p.a, p.b, p.done, p.t), fields(p)
        got = app.PendingCodec.decode(data)
        assert fields(got) == fields(p)
        # The shapes read in one unpack read as the general reader reads them.
        assert fields(app._decode_row(data)) == fields(p)


def row_value(*pairs):
    return weir_sdk.row.encode_value(list(pairs))


def decimal_field(name, text):
    return bytes((7, len(name))) + name.encode() + struct.pack("<I", len(text)) + text.encode()


@pytest.mark.parametrize(
    "data, expected",
    [
        # Any order; unknown fields skipped, whatever their type.
        (row_value(("t", 7), ("done", False), ("b", 2.5), ("a", 1.5)), (1.5, 2.5, False, 7)),
        (row_value(("x", "s"), ("a", 1.0), ("y", None), ("z", 2**64 - 1), ("w", True), ("v", -0.5))
         + decimal_field("u", "1e999"), (1.0, None, False, None)),
        # A side: a double, an integer (s64, u64) as a double, a decimal's
        # text as a double, null as absent.
        (row_value(("a", -3), ("b", 2**64 - 1)), (-3.0, 1.8446744073709552e19, False, None)),
        (b"\xff" + decimal_field("a", "12.50") + decimal_field("b", "-1e400"), (12.5, -math.inf, False, None)),
        (b"\xff" + decimal_field("a", "0.1"), (0.1, None, False, None)),
        (row_value(("a", None), ("b", None), ("done", True), ("t", None)), (None, None, True, None)),
        # t: s64, u64 up to s64's largest.
        (row_value(("t", -(2**63))), (None, None, False, -(2**63))),
        (b"\xff\x04\x01t" + struct.pack("<Q", 2**63 - 1), (None, None, False, 2**63 - 1)),
        (b"\xff\x04\x01t" + struct.pack("<Q", 5), (None, None, False, 5)),
        # Shapes of the one-unpack reader that are not quite them.
        (b"\xff\x05\x01c" + struct.pack("<d", 1.0), (None, None, False, None)),
        (b"\xff\x02\x04dono\x03\x01t" + struct.pack("<q", 9), (None, None, False, 9)),
        (b"\xff\x02\x04done\x03\x01u" + struct.pack("<q", 9), (None, None, True, None)),
        (row_value(("a", 1.0), ("b", 2.0)), (1.0, 2.0, False, None)),
        (row_value(("b", 1.0), ("a", 2.0)), (2.0, 1.0, False, None)),
        (row_value(("a", 1.0), ("u", 2)), (1.0, None, False, None)),
        (row_value(("a", 1.0), ("t", 2)), (1.0, None, False, 2)),
        # A field given twice: the last counts.
        (row_value(("a", 1.0), ("a", 2.0)), (2.0, None, False, None)),
        # JSON of version 1.
        (b'{"a":1.5,"done":true,"t":3}', (1.5, None, True, 3)),
        (b'{"b":2}', (None, 2.0, False, None)),
    ],
)
def test_row_values_read_as_the_spec_says(data, expected):
    p = app.PendingCodec.decode(data)
    assert fields(p) == fields(app.Pending(*expected))


@pytest.mark.parametrize(
    "data, why",
    [
        (row_value(("a", "12")), r'`a` is not a number: "12"'),
        (row_value(("b", True)), r"`b` is not a number: true"),
        (row_value(("a", False)), r"`a` is not a number: false"),
        (row_value(("done", None)), r"`done` is not a bool: null"),
        (row_value(("done", 1)), r"`done` is not a bool: 1"),
        (row_value(("done", "true")), r'`done` is not a bool: "true"'),
        (b"\xff" + decimal_field("done", "1"), r"`done` is not a bool: 1"),
        (b"\xff\x04\x01t" + struct.pack("<Q", 2**63), r"`t` is not a 64-bit signed integer: 9223372036854775808"),
        (row_value(("t", 1.0)), r"`t` is not a 64-bit signed integer: 1.0"),
        (row_value(("t", True)), r"`t` is not a 64-bit signed integer: true"),
        (b"\xff" + decimal_field("t", "5"), r"`t` is not a 64-bit signed integer: 5"),
        (row_value(("t", "5")), r'`t` is not a 64-bit signed integer: "5"'),
        # Malformed rows, also in fields the operator does not read.
        (b"\xff\x05\x01a\x00\x00", "the row ends inside its field at byte 0"),
        (b"\xff\x02\x04done\x03\x01t\x00", "the row ends inside its field at byte 6"),
        (b"\xff\x02\x04done\x08\x01x", "the row's field at byte 6 has unknown type 8"),
        (b"\xff\x00\x01\xff", "not UTF-8"),
        (b"\xff\x06\x01x\x01\x00\x00\x00\xff", "not UTF-8"),
        (b"\xff" + decimal_field("x", "01"), "the row's decimal '01' is not a JSON number"),
        (b"\xff" + decimal_field("a", "nan"), "the row's decimal 'nan' is not a JSON number"),
        (b"\xff\x05", "the row ends inside its field at byte 0"),
        # Shapes of the one-unpack reader that are not quite them.
        (b"\xff\x05\x01c" + struct.pack("<d", 1.0) + b"\x03\x01t" + b"\x00" * 7,
         "ends inside its field at byte 11"),
        # JSON, as before.
        (b'{"a":"x"}', "could not convert string to float"),
        (b'{"t":1.5}', "`t` is not an integer: 1.5"),
        (b"[1]", "has no attribute"),
        (b"{", "Expecting property name"),
    ],
)
def test_a_value_that_does_not_decode_is_incompatible_state(data, why):
    with pytest.raises(IncompatibleState, match=r"state `rc` holds a value that does not decode: .*" + why):
        app.PendingCodec.decode(data)
    h = Harness(app.Reconcile)
    h.state[b"k\x00rc"] = data
    with pytest.raises(IncompatibleState, match="state `rc` holds a value that does not decode"):
        h.process("a", [order("k", 1)])


def test_state_under_timeout_holds_the_first_timestamp():
    h = Harness(app.Reconcile, {"timeout": "10ms"})
    h.process("a", [order("x", 1, ts=100), order("y", 2.5, ts=-3)])
    h.checkpoint()
    assert h.state[b"x\x00rc"] == spec_row(a=1.0, t=100)
    assert h.state[b"y\x00rc"] == spec_row(a=2.5, t=-3)
    h.restart()
    h.process("b", [order("y", 2.5, ts=200)])
    h.checkpoint()
    assert h.state[b"y\x00rc"] == spec_row(done=True, t=-3)
    h.advance_watermark(110)
    h.checkpoint()
    assert h.state[b"x\x00rc"] == spec_row(done=True, t=100)
    assert b"y\x00rc" not in h.state  # a tombstone until -3 + 2 x 10
    # A version 1 key under timeout continues too.
    h.restart()
    h.state[b"z\x00rc"] = b'{"b":4.0,"t":105}'
    out = h.process("a", [order("z", 4, ts=106)])
    assert values(out) == [{"key": "z", "status": "MATCH", "a": 4.0, "b": 4.0}]
    h.checkpoint()
    assert h.state[b"z\x00rc"] == spec_row(done=True, t=105)
