"""reconcile on the harness: what plugins/reconcile (Rust) does."""

import json

import pytest

from weir_sdk import InvalidConfig, InvalidInput, Record
from weir_sdk.testing import Harness, load_app

app = load_app(__file__)


def order(key, amount, ts=None):
    return Record(json.dumps({"key": key, "amount": amount}), timestamp=ts)


def values(out):
    return [json.loads(r.value) for r in out]


def test_keys_on_both_sides_match_or_mismatch_at_once():
    h = Harness(app.Reconcile, {"tolerance": 0.5})
    assert h.process("a", [order("k1", "10.0"), order("k2", 5), order("k3", 1)]) == []
    out = h.process("b", [order("k1", 10.2), order("k2", "7"), order("k2", 5)])
    assert values(out) == [
        {"key": "k1", "status": "MATCH", "a": 10.0, "b": 10.2},
        {"key": "k2", "status": "AMOUNT_MISMATCH", "a": 5.0, "b": 7.0},
    ]
    assert out[0].value == b'{"key":"k1","status":"MATCH","a":10.0,"b":10.2}'
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
