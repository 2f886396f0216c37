"""JSON text as serde_json writes it."""

from dataclasses import dataclass

import pytest

from weir_sdk import fmt_f64, json_text


@pytest.mark.parametrize(
    "x, text",
    [
        (20.0, "20.0"),
        (-0.0, "-0.0"),
        (0.1, "0.1"),
        (0.00001, "0.00001"),
        (1.5e-7, "1.5e-7"),
        (1e16, "1e+16"),
        (123456789012345.6, "123456789012345.6"),
        (float("nan"), "null"),
        (float("inf"), "null"),
    ],
)
def test_floats_as_serde_json_writes_them(x, text):
    assert fmt_f64(x) == text


def test_values_are_compact_and_keep_their_order():
    @dataclass
    class P:
        b: int
        a: str

    assert json_text({"z": [1, 2.5, None, True], "a": "ü\n\"\x01"}) == '{"z":[1,2.5,null,true],"a":"ü\\n\\"\\u0001"}'
    assert json_text(P(1, "x")) == '{"b":1,"a":"x"}'
    assert json_text({"b": 1, "a": 2}, sort_keys=True) == '{"a":2,"b":1}'
    with pytest.raises(TypeError):
        json_text(b"bytes")
