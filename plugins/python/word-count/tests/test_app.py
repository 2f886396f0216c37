"""word-count on the harness: what plugins/word-count (Rust) does."""

import json

import pytest

from weir_sdk import InvalidConfig, InvalidInput, Record
from weir_sdk.testing import Harness, load_app

app = load_app(__file__)


def values(out):
    return [json.loads(r.value) for r in out]


def test_counts_each_word_and_emits_one_record_per_input():
    h = Harness(app.WordCount)
    out = h.process("in", ["a", "b", " a ", ""])
    assert values(out) == [{"word": "a", "count": 1}, {"word": "b", "count": 1}, {"word": "a", "count": 2}]
    assert [r.key for r in out] == [b"a", b"b", b"a"]


def test_output_is_what_serde_json_writes():
    h = Harness(app.WordCount)
    out = h.process("in", ['ü"\\\n'])
    assert out[0].value == '{"word":"ü\\"\\\\","count":1}'.encode()


def test_the_key_wins_over_the_value_and_lowercase_works():
    h = Harness(app.WordCount, {"lowercase": True})
    out = h.process("in", [Record("ignored", key="Hello"), Record("HELLO"), Record("x", key=b"\xff")])
    assert values(out) == [{"word": "hello", "count": 1}, {"word": "hello", "count": 2}, {"word": "x", "count": 1}]


def test_unicode_whitespace_is_trimmed_as_rust_trims_it():
    h = Harness(app.WordCount)
    out = h.process("in", ["\u3000w\u00a0", "\x1cw"])
    assert values(out) == [{"word": "w", "count": 1}, {"word": "\x1cw", "count": 1}]


def test_timestamps_are_kept():
    h = Harness(app.WordCount)
    assert [r.timestamp for r in h.process("in", [Record("a", timestamp=5), Record("a")])] == [5, None]


def test_counts_reach_host_state_at_checkpoints_in_the_rust_layout():
    h = Harness(app.WordCount)
    h.process("in", ["a", "a", "b"])
    assert h.state == {}
    h.checkpoint()
    assert h.state == {b"a\x00count": b"2", b"b\x00count": b"1"}
    assert h.host_calls["get_many"] == 1 and h.host_calls["put_many"] == 1


def test_counts_survive_a_restart_because_state_is_host_owned():
    h = Harness(app.WordCount)
    h.process("in", ["a"])
    h.checkpoint()
    h.restart()
    assert values(h.process("in", ["a"])) == [{"word": "a", "count": 2}]


def test_state_written_by_the_rust_build_continues():
    h = Harness(app.WordCount)
    h.state[b"a\x00count"] = b"41"
    assert values(h.process("in", ["a"])) == [{"word": "a", "count": 42}]


def test_bad_config_and_input_are_errors_naming_the_problem():
    with pytest.raises(InvalidConfig, match="unknown field `lower`"):
        Harness(app.WordCount, {"lower": True})
    with pytest.raises(InvalidConfig, match="`lowercase`: expected a boolean"):
        Harness(app.WordCount, {"lowercase": "yes"})
    with pytest.raises(InvalidInput, match="not UTF-8"):
        Harness(app.WordCount).process("in", [Record(b"\xff")])
