"""reconcile on the harness: what plugins/reconcile (Rust) does."""

import json
import math

import pytest

from weir_sdk import InvalidConfig, InvalidInput, Record
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
    assert h.state[b"k1\x00rc"] == b'{"done":true}'


def test_state_is_the_rust_builds_layout_and_continues_from_it():
    h = Harness(app.Reconcile)
    h.state[b"k\x00rc"] = b'{"b":2.0}'
    assert values(h.process("a", [order("k", 2)])) == [{"key": "k", "status": "MATCH", "a": 2.0, "b": 2.0}]
    h.checkpoint()
    assert h.state[b"k\x00rc"] == b'{"done":true}'


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
