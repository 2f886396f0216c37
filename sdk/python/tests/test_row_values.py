"""Row values in keyed state (0xFF and a row): `Row` writes them byte for
byte, falls back to `Json`'s text for what a row cannot hold, and every
codec reads them, so state a Rust build wrote as rows restores here."""

import json
import math
import random
import struct
from dataclasses import dataclass
from decimal import Decimal

import pytest

from weir_sdk import IncompatibleState, Json, MapState, Operator, Row, ValueState, row
from weir_sdk.testing import Harness


def f64(hex_bits):
    """The double whose IEEE bits, little-endian, are `hex_bits`."""
    return struct.unpack("<d", bytes.fromhex(hex_bits))[0]


def bits(x):
    return struct.pack("<d", x)


# (value, its row value) for every type a row holds, written out by hand:
# 0xFF, then per field its type byte, name length, name, payload.
ENCODED = [
    ({"n": None}, b"\xff\x00\x01n"),
    ({"f": False}, b"\xff\x01\x01f"),
    ({"t": True}, b"\xff\x02\x01t"),
    ({"i": 0}, b"\xff\x03\x01i" + b"\x00" * 8),
    ({"i": -2}, b"\xff\x03\x01i\xfe\xff\xff\xff\xff\xff\xff\xff"),
    ({"i": 2**63 - 1}, b"\xff\x03\x01i\xff\xff\xff\xff\xff\xff\xff\x7f"),
    ({"i": -(2**63)}, b"\xff\x03\x01i\x00\x00\x00\x00\x00\x00\x00\x80"),
    ({"u": 2**63}, b"\xff\x04\x01u\x00\x00\x00\x00\x00\x00\x00\x80"),
    ({"u": 2**64 - 1}, b"\xff\x04\x01u\xff\xff\xff\xff\xff\xff\xff\xff"),
    ({"x": 0.5}, b"\xff\x05\x01x\x00\x00\x00\x00\x00\x00\xe0\x3f"),
    ({"x": 12.5}, b"\xff\x05\x01x\x00\x00\x00\x00\x00\x00\x29\x40"),
    ({"x": -0.0}, b"\xff\x05\x01x\x00\x00\x00\x00\x00\x00\x00\x80"),
    ({"x": math.inf}, b"\xff\x05\x01x\x00\x00\x00\x00\x00\x00\xf0\x7f"),
    ({"x": -math.inf}, b"\xff\x05\x01x\x00\x00\x00\x00\x00\x00\xf0\xff"),
    ({"x": math.nan}, b"\xff\x05\x01x\x00\x00\x00\x00\x00\x00\xf8\x7f"),
    ({"x": f64("000000000000f8ff")}, b"\xff\x05\x01x\x00\x00\x00\x00\x00\x00\xf8\xff"),
    ({"x": f64("010000000000f07f")}, b"\xff\x05\x01x\x01\x00\x00\x00\x00\x00\xf0\x7f"),
    ({"s": ""}, b"\xff\x06\x01s\x00\x00\x00\x00"),
    ({"s": "\xe9\n"}, b"\xff\x06\x01s\x03\x00\x00\x00\xc3\xa9\n"),
    ({"d": Decimal("12.50")}, b"\xff\x07\x01d\x05\x00\x00\x0012.50"),
    ({"d": Decimal("-0")}, b"\xff\x07\x01d\x02\x00\x00\x00-0"),
    ({"d": Decimal("1e5")}, b"\xff\x07\x01d\x04\x00\x00\x001E+5"),
    ({"d": Decimal("-2.5E-7")}, b"\xff\x07\x01d\x07\x00\x00\x00-2.5E-7"),
    ({}, b"\xff"),
    ({"\xe9": 1, "": None}, b"\xff\x03\x02\xc3\xa9\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00"),
    ({"a": 1.0, "b": "x", "done": True},
     b"\xff\x05\x01a\x00\x00\x00\x00\x00\x00\xf0\x3f\x06\x01b\x01\x00\x00\x00x\x02\x04done"),
]


def same(a, b):
    """Equal values of the same type; floats by their bits (NaN, -0.0)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return bits(a) == bits(b)
    if type(a) is Decimal:
        return str(a) == str(b)
    return a == b


def same_fields(a, b):
    return list(a) == list(b) and all(same(a[k], b[k]) for k in a)


@pytest.mark.parametrize("value, encoded", ENCODED)
def test_row_writes_each_type_as_the_spec_lays_it_out(value, encoded):
    assert Row().encode(value) == encoded
    assert row.encode_value(value) == encoded
    assert row.is_value(encoded)
    assert same_fields(Row().decode(encoded), value)


@pytest.mark.parametrize("value, encoded", [(v, e) for v, e in ENCODED if e != b"\xff"])
def test_json_reads_each_row_value_as_json_reads_the_value(value, encoded):
    got = Json().decode(encoded)
    expected = {
        k: json.loads(str(v)) if isinstance(v, Decimal) else v for k, v in value.items()
    }
    assert same_fields(got, expected)


@dataclass
class Order:
    id: str
    amount: float
    qty: int = 1
    note: object = None


def test_a_dataclass_is_the_row_of_its_fields_and_reads_back_as_one():
    order = Order("o-1", 2.5, 3)
    encoded = Row().encode(order)
    assert encoded == Row().encode({"id": "o-1", "amount": 2.5, "qty": 3, "note": None})
    assert Row(Order).decode(encoded) == order
    assert Json(Order).decode(encoded) == order
    assert Row().decode(encoded) == {"id": "o-1", "amount": 2.5, "qty": 3, "note": None}
    # Fields the dataclass does not have are left out, as from JSON.
    extra = row.encode_value({"id": "o-2", "amount": 1.0, "other": True})
    assert Row(Order).decode(extra) == Json(Order).decode(b'{"id":"o-2","amount":1.0,"other":true}')
    # A dataclass holding what a row cannot hold is JSON.
    nested = Order("o-3", 1.0, note={"gift": True})
    assert Row().encode(nested) == Json().encode(nested) == (
        b'{"id":"o-3","amount":1.0,"qty":1,"note":{"gift":true}}'
    )
    assert Row(Order).decode(Row().encode(nested)) == nested


def random_value(rng):
    kind = rng.randrange(9)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, 1, -1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1, rng.randrange(-(2**63), 2**64)])
    if kind == 3:
        return rng.randrange(-1000, 1000)
    if kind == 4:
        # Any bits: NaNs with payloads, infinities, -0.0, subnormals.
        return struct.unpack("<d", rng.randbytes(8))[0]
    if kind == 5:
        return rng.choice([0.0, -0.0, 0.1, 1e16, -1.5e-7, math.inf, math.nan])
    if kind == 6:
        return "".join(rng.choice("ab\"\\\n\x00é€😀") for _ in range(rng.randrange(8)))
    if kind == 7:
        texts = ["0", "-0", "12.50", "1e5", "-2.5E-7", "0.000", "123456789012345678901234567890"]
        return Decimal(rng.choice(texts))
    return Decimal(rng.randrange(-(10**30), 10**30)).scaleb(rng.randrange(-40, 40))


def random_name(rng):
    return rng.choice(["a", "b", "é", "", "done", "x" * rng.randrange(1, 256), "ü" * rng.randrange(1, 128)])


def test_random_flat_dicts_read_back_as_they_were_written():
    rng = random.Random(46)
    for _ in range(3000):
        value = {random_name(rng): random_value(rng) for _ in range(rng.randrange(7))}
        encoded = Row().encode(value)
        assert encoded[:1] == b"\xff", value
        got = Row().decode(encoded)
        assert same_fields(got, value), (value, got)
        # Bytes that are no bytes object (a host may hand over a slice of
        # a larger buffer) read the same.
        assert same_fields(Row().decode(bytearray(encoded)), value)


def test_json_reads_a_row_value_as_it_reads_the_rows_json():
    rng = random.Random(47)
    for _ in range(3000):
        # Names may repeat (the last value counts, in the first's place, as
        # in JSON); floats are finite (JSON has no NaN: a row keeps it).
        pairs = []
        for _ in range(rng.randrange(7)):
            v = random_value(rng)
            if isinstance(v, float) and not math.isfinite(v):
                v = 0.25
            pairs.append((rng.choice(["a", "b", "é", "c"]), v))
        encoded = row.encode_value(pairs)
        text = row.to_json(encoded[1:])
        got = Json().decode(encoded)
        want = Json().decode(text.encode())
        assert same_fields(got, want), (pairs, got, want)
        if not any(isinstance(v, Decimal) for _, v in pairs):
            # Without decimals a row value is what JSON's text of it is.
            assert Json().decode(Json().encode(dict(pairs))) == got


@pytest.mark.parametrize(
    "value",
    [
        {"nested": {"x": 1}},
        {"a": 1, "list": [1, 2]},
        {"tuple": (1, "x")},
        {"big": 2**64},
        {"small": -(2**63) - 1},
        {"é" * 128: 1},
        {"x" * 256: 1},
        5,
        -7.5,
        "text",
        None,
        True,
        [1, {"a": None}],
        (),
    ],
)
def test_what_a_row_cannot_hold_is_written_as_json_does(value):
    encoded = Row().encode(value)
    assert encoded == Json().encode(value)
    assert encoded[:1] != b"\xff"
    assert Row().decode(encoded) == Json().decode(encoded)


@pytest.mark.parametrize("value", [{1: "a"}, {"d": Decimal("NaN")}, {"b": b"bytes"}, {"x": object()}])
def test_what_neither_can_hold_fails_as_json_does(value):
    with pytest.raises(TypeError) as json_error:
        Json().encode(value)
    with pytest.raises(TypeError) as row_error:
        Row().encode(value)
    assert str(row_error.value) == str(json_error.value)


def test_json_text_still_reads_as_before():
    for text in [b'{"a":1,"b":[1,2],"c":null}', b"5", b'"s"', b"[]", b"{}", b"1.5"]:
        assert Row().decode(text) == Json().decode(text) == json.loads(text)


def malformed(payload):
    return b"\xff" + payload


@pytest.mark.parametrize(
    "data, why",
    [
        (malformed(b"\x06\x01s\x05\x00\x00\x00abc"), "the row ends inside its field at byte 0"),
        (malformed(b"\x03\x01i\x01\x02"), "the row ends inside its field at byte 0"),
        (malformed(b"\x05\x01x" + bits(1.0)[:7]), "the row ends inside its field at byte 0"),
        (malformed(b"\x00\x01a\x00\x09ab"), "the row ends inside its field at byte 3"),
        (malformed(b"\x00"), "the row ends inside its field at byte 0"),
        (malformed(b"\x00\x01a\x08\x01b"), "the row's field at byte 3 has unknown type 8"),
        (malformed(b"\xff\x00"), "the row's field at byte 0 has unknown type 255"),
        (malformed(b"\x00\x01\xff"), "at byte 0 has a name or string that is not UTF-8"),
        (malformed(b"\x06\x01s\x01\x00\x00\x00\xff"), "at byte 0 has a name or string that is not UTF-8"),
        (malformed(b"\x07\x01d\x02\x00\x00\x0001"), "the row's decimal '01' is not a JSON number"),
        (malformed(b"\x07\x01d\x01\x00\x00\x00x"), "the row's decimal 'x' is not a JSON number"),
        (malformed(b"\x07\x01d\x02\x00\x00\x001."), "the row's decimal '1.' is not a JSON number"),
        (malformed(b"\x07\x01d\x02\x00\x00\x00+1"), "the row's decimal '\\+1' is not a JSON number"),
        (malformed(b"\x07\x01d\x03\x00\x00\x00NaN"), "the row's decimal 'NaN' is not a JSON number"),
        (malformed(b"\x07\x01d\x00\x00\x00\x00"), "the row's decimal '' is not a JSON number"),
        # A cut decimal says it is cut, not that its text is no number.
        (malformed(b"\x07\x01d\x04\x00\x00\x001."), "the row ends inside its field at byte 0"),
    ],
)
def test_a_malformed_row_value_says_what_is_wrong(data, why):
    for codec in (Json(), Row(), Json(Order), Row(Order)):
        with pytest.raises(row.BadRow, match=why):
            codec.decode(data)
    with pytest.raises(row.BadRow, match=why):
        row.read_value(data)


# ------------------------------------------------------- through MapState


class Tally(Operator):
    """Per key the last value's fields and a count, as rows; a total."""

    name = "tally"
    codec = Row()

    def open(self, ctx):
        self.last = MapState("last", value=self.codec)
        self.total = ValueState("total", value=self.codec)

    def process(self, ctx, port, batch):
        for r in batch.records:
            v = json.loads(r.value, parse_float=Decimal)
            k = v["k"]
            prev = self.last.get(k, {"n": 0})
            self.last[k] = {**v, "n": prev["n"] + 1}
            ctx.emit(json.dumps(self.last[k], default=str), k)
        self.total.update(lambda t: {"records": t["records"] + len(batch)}, {"records": 0})

    def finish(self, ctx):
        for k, v in self.last.items():
            ctx.emit(f"{k}={v['n']}", k)


class TallyAsJson(Tally):
    codec = Json()


def test_row_state_is_stored_as_rows_and_restores():
    h = Harness(Tally)
    h.process("in", ['{"k":"a","x":1.50}', '{"k":"b","x":true}', '{"k":"a","x":"s"}'])
    h.checkpoint()
    assert h.state[b"a\x00last"] == (
        b"\xff\x06\x01k\x01\x00\x00\x00a\x06\x01x\x01\x00\x00\x00s\x03\x01n" + struct.pack("<q", 2)
    )
    assert h.state[b"b\x00last"] == (
        b"\xff\x06\x01k\x01\x00\x00\x00b\x02\x01x\x03\x01n" + struct.pack("<q", 1)
    )
    assert h.state[b"\x00total"] == b"\xff\x03\x07records" + struct.pack("<q", 3)
    h.restart()
    out = h.process("in", ['{"k":"b","x":2.25}'])
    assert json.loads(out[0].value) == {"k": "b", "x": "2.25", "n": 2}
    h.checkpoint()
    assert h.state[b"b\x00last"] == (
        b"\xff\x06\x01k\x01\x00\x00\x00b\x07\x01x\x04\x00\x00\x002.25\x03\x01n" + struct.pack("<q", 2)
    )
    assert [r.value for r in h.finish()] == [b"a=2", b"b=2"]


def test_state_written_as_rows_restores_into_json_state_and_back():
    # As when a Rust build that writes rows hands over to a Python build on
    # `Json`: the values read, and are written back as JSON.
    h = Harness(Tally)
    h.process("in", ['{"k":"a","x":1.5}', '{"k":"a","x":3}'])
    h.checkpoint()
    h.restart(TallyAsJson)
    out = h.process("in", ['{"k":"a","x":1}'])
    assert json.loads(out[0].value) == {"k": "a", "x": 1, "n": 3}
    h.checkpoint()
    assert h.state[b"a\x00last"] == b'{"k":"a","x":1,"n":3}'
    assert h.state[b"\x00total"] == b'{"records":3}'
    h.restart(Tally)
    h.process("in", ['{"k":"a","x":null}'])
    h.checkpoint()
    assert Row().decode(h.state[b"a\x00last"]) == {"k": "a", "x": None, "n": 4}


def test_a_malformed_row_value_in_state_is_incompatible_state():
    h = Harness(TallyAsJson)
    h.state[b"a\x00last"] = b"\xff\x03\x01n\x01"
    why = r"state `last` holds a value under .* that does not decode: the row ends inside its field at byte 0"
    with pytest.raises(IncompatibleState, match=why):
        h.process("in", ['{"k":"a"}'])
    h = Harness(Tally)
    h.state[b"a\x00last"] = b"\xff\x09\x01n"
    with pytest.raises(IncompatibleState, match="state `last` holds an entry .* unknown type 9"):
        h.finish()
