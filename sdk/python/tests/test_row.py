"""Rows (wit/flat.wit): the layout byte for byte, reading and writing
against a simple model, JSON as the host writes it, and rows through
records, flat batches, `Context.emit_row` and the harness."""

import json
import math
import random
import struct
from decimal import Decimal

import pytest

from weir_sdk import Change, InvalidInput, Operator, Record, flat, row
from weir_sdk.runtime import describe
from weir_sdk.testing import Harness


def field(kind, name, payload=b""):
    n = name.encode()
    return bytes((kind, len(n))) + n + payload


def text(s):
    b = s.encode()
    return struct.pack("<I", len(b)) + b


# One field of each type, laid out as wit/flat.wit says.
LAID_OUT = b"".join(
    [
        field(0, "n"),
        field(1, "f"),
        field(2, "t"),
        field(3, "i", struct.pack("<q", -2)),
        field(4, "u", struct.pack("<Q", 2**64 - 1)),
        field(5, "x", struct.pack("<d", 0.5)),
        field(6, "s", text("é\n")),
        field(7, "d", text("12.50")),
    ]
)
FIELDS = {
    "n": None,
    "f": False,
    "t": True,
    "i": -2,
    "u": 2**64 - 1,
    "x": 0.5,
    "s": "é\n",
    "d": Decimal("12.50"),
}


def test_a_row_is_laid_out_as_wit_flat_says():
    assert row.encode(FIELDS) == LAID_OUT
    assert row.encode(list(FIELDS.items())) == LAID_OUT
    assert row.read(LAID_OUT) == FIELDS
    assert list(row.read(LAID_OUT)) == list(FIELDS), "fields keep their order"
    assert row.items(LAID_OUT) == list(FIELDS.items())
    # Integers take the signed type while they fit it.
    assert row.encode({"a": 2**63 - 1})[0] == row.INT
    assert row.encode({"a": 2**63})[0] == row.UINT
    assert row.encode({"a": -(2**63)})[0] == row.INT


def test_json_is_what_the_host_writes():
    assert row.to_json(LAID_OUT) == (
        '{"n":null,"f":false,"t":true,"i":-2,"u":18446744073709551615,'
        '"x":0.5,"s":"\u00e9\\n","d":12.50}'
    )
    floats = {"a": 1e16, "b": 20.0, "c": 1.5e-7, "d": float("nan"), "e": float("-inf"), "f": -0.0}
    assert row.to_json(row.encode(floats)) == (
        '{"a":1e+16,"b":20.0,"c":1.5e-7,"d":null,"e":null,"f":-0.0}'
    )
    # A name given twice is in the JSON twice, in order; the dict keeps the last.
    twice = row.encode([("a", 1), ("b", 2), ("a", 3)])
    assert row.to_json(twice) == '{"a":1,"b":2,"a":3}'
    assert row.read(twice) == {"a": 3, "b": 2}
    assert row.to_json(b"") == "{}"
    assert row.read(b"") == {}


def random_value(rng):
    kind = rng.randrange(8)
    if kind == 0:
        return None
    if kind == 1:
        return rng.random() < 0.5
    if kind == 2:
        return rng.choice([0, -1, 1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1, rng.randrange(-(2**63), 2**64)])
    if kind == 3:
        return rng.choice([0.0, -0.0, 1e-300, 1e300, rng.uniform(-1e6, 1e6), float("inf"), float("nan")])
    if kind == 4:
        return "".join(rng.choice("aé\"\\\n\x00€😀 ") for _ in range(rng.randrange(6)))
    if kind == 5:
        return Decimal(rng.choice(["0", "-0.00", "12.50", "1E+3", "-7e-2", str(rng.randrange(10**30))]))
    return ""


def same(a, b):
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def test_random_rows_read_back_and_their_json_is_the_model_s():
    rng = random.Random(46)
    for _ in range(3000):
        names = [rng.choice(["a", "b", "é", "", "x" * rng.randrange(1, 256)]) for _ in range(rng.randrange(6))]
        pairs = [(n, random_value(rng)) for n in names]
        buf = row.encode(pairs)
        got = row.items(buf)
        assert len(got) == len(pairs)
        for (n, v), (gn, gv) in zip(pairs, got):
            assert gn == n and same(gv, v) and type(gv) is type(v), (pairs, got)
        # The JSON text is the object of the fields in order; parsed, each
        # value is the field's (non-finite floats are null).
        parsed = json.loads(row.to_json(buf), object_pairs_hook=list, parse_float=Decimal)
        assert [k for k, _ in parsed] == names
        for (_, v), (_, pv) in zip(pairs, parsed):
            if isinstance(v, float):
                assert pv is None if not math.isfinite(v) else Decimal(repr(v)) == pv
            elif isinstance(v, Decimal):
                assert pv == v
            else:
                assert pv == v
        # A row in a bytearray reads the same.
        read = row.read(bytearray(buf))
        assert list(read) == list(dict(got))
        assert all(same(read[k], v) for k, v in dict(got).items())


@pytest.mark.parametrize(
    "buf, why",
    [
        (field(6, "s", struct.pack("<I", 5) + b"abc"), "ends inside its field at byte 0"),
        (field(3, "i", b"\x01\x02"), "ends inside its field at byte 0"),
        (field(0, "a") + bytes((0, 9)) + b"ab", "ends inside its field at byte 3"),
        (field(0, "a") + field(8, "b"), "field at byte 3 has unknown type 8"),
        (field(6, "s", text("a")[:4] + b"\xff"), "not UTF-8"),
        (bytes((0, 1, 0xFF)), "not UTF-8"),
        (b"\x00", "ends inside its field at byte 0"),
    ],
)
def test_bytes_that_are_no_row_say_where(buf, why):
    with pytest.raises(row.BadRow, match=why):
        row.read(buf)
    with pytest.raises(row.BadRow, match=why):
        row.items(buf)
    with pytest.raises(row.BadRow, match=why):
        row.to_json(buf)


@pytest.mark.parametrize(
    "fields, why",
    [
        ({"a": 1, "nested": {"x": 1}}, "field `nested`: a row holds None.*not dict; emit nested values as JSON"),
        ({"a": [1]}, "not list"),
        ({"big": 2**64}, "field `big`: 18446744073709551616 does not fit 64 bits; write it as a Decimal"),
        ({"small": -(2**63) - 1}, "does not fit 64 bits"),
        ({"d": Decimal("NaN")}, "field `d`: a row's decimal is a number, not NaN"),
        ({"d": Decimal("Infinity")}, "not Infinity"),
        ({"é" * 128: 1}, "at most 255 bytes"),
        ({1: 1}, "field names are str, not int"),
        ({"b": b"bytes"}, "not bytes"),
    ],
)
def test_values_a_row_cannot_hold_are_refused_and_nothing_is_written(fields, why):
    out = bytearray(b"before")
    with pytest.raises(row.BadRow, match=why):
        row.write(out, {"first": "written, then taken back", **fields})
    assert out == b"before"


def test_a_record_holding_a_row_reads_as_a_row_and_not_as_text():
    r = Record.of_row(FIELDS, key="k", timestamp=7, change=Change.DELETE)
    assert (r.is_row, r.value, r.key, r.timestamp, r.change) == (True, LAID_OUT, b"k", 7, Change.DELETE)
    assert r.row() == FIELDS
    assert r.row(decimal=float)["d"] == 12.5
    assert r.row(decimal=json.loads)["d"] == 12.5
    for read in (r.value_str, r.parse_json):
        with pytest.raises(InvalidInput, match=r"record value is a row.*record.row\(\)"):
            read()
    text = r.as_text()
    assert (text.is_row, text.value, text.key, text.timestamp, text.change) == (
        False, row.to_json(LAID_OUT).encode(), b"k", 7, Change.DELETE,
    )
    assert text.as_text() is text and text.row() is None
    # Copies stay rows; a row differs from a text record of the same bytes.
    assert r.with_key("j").is_row and r.with_timestamp(1).is_row and r.with_change(0).is_row
    assert r != Record(LAID_OUT, "k", 7, Change.DELETE)
    assert "row={'n': None" in repr(r)
    bad = Record.of_row({})
    bad.value = b"\x09\x00"
    with pytest.raises(InvalidInput, match="record value is no row: .*unknown type 9"):
        bad.row()


def test_rows_cross_flat_batches_with_bit_5_of_their_flags():
    recs = [Record.of_row({"a": 1}, key="k"), Record("text"), Record.of_row({}, timestamp=3)]
    data, spans = flat.pack_records(recs)
    flags = [s[4] for s in flat.SPAN.iter_unpack(spans)]
    assert flags == [1 | 32, 0, 2 | 32]
    assert flat.records(data, spans) == recs
    # A row written in place by the writer is the same bytes.
    w = flat.FlatWriter()
    w.push(b"k", None, None, Change.UPDATE_AFTER, True, {"a": 1})
    data, spans = w.take()
    (got,) = flat.records(data, spans)
    assert (got.is_row, got.value, got.change) == (True, row.encode({"a": 1}), Change.UPDATE_AFTER)
    assert flat.SPAN.unpack(spans)[4] == 1 | (2 << 2) | 32


class Rows(Operator):
    """Emits each record's fields as a row: a row as it came, text parsed."""

    name = "rows"
    reads_rows = True

    def process(self, ctx, port, batch):
        for r in batch:
            fields = r.row() if r.is_row else r.parse_json()
            ctx.emit_row({"seen_as_row": r.is_row, **fields}, r.key)
            if "forward" in fields:
                ctx.emit_record(r)


class Texts(Rows):
    reads_rows = False


def test_an_operator_that_reads_rows_gets_rows_and_one_that_does_not_gets_json():
    rows = [Record.of_row({"n": 1, "d": Decimal("1.50")}, key="k"), Record('{"n": 2}')]
    out = Harness(Rows).process("in", rows)
    assert [r.row() for r in out] == [
        {"seen_as_row": True, "n": 1, "d": Decimal("1.50")},
        {"seen_as_row": False, "n": 2},
    ]
    assert out[0].key == b"k" and all(r.is_row for r in out)
    assert [r.as_text().value for r in out] == [
        b'{"seen_as_row":true,"n":1,"d":1.50}',
        b'{"seen_as_row":false,"n":2}',
    ]
    # The same records to an operator that reads text: the row is its JSON
    # (the decimal a JSON number as written, read back as a float).
    out = Harness(Texts).process("in", rows)
    assert [r.row() for r in out] == [
        {"seen_as_row": False, "n": 1, "d": 1.5},
        {"seen_as_row": False, "n": 2},
    ]
    # `emit_record` forwards a row as a row.
    out = Harness(Rows).process("in", [Record.of_row({"forward": 1})])
    assert out[1] == Record.of_row({"forward": 1})


def test_emit_row_refuses_what_a_row_cannot_hold_and_emits_nothing_for_it():
    class Bad(Operator):
        name = "bad"

        def process(self, ctx, port, batch):
            ctx.emit_row({"ok": 1})
            try:
                ctx.emit_row({"n": {"nested": 1}})
            except row.BadRow as e:
                ctx.emit_row({"refused": str(e)})

    out = Harness(Bad).process("in", ["x"])
    assert [r.row() for r in out] == [
        {"ok": 1},
        {"refused": "field `n`: a row holds None, bool, int, float, str or Decimal, not dict; "
                    "emit nested values as JSON (Context.emit_json)"},
    ]


def test_reads_rows_must_be_a_bool():
    class Wrong(Rows):
        reads_rows = "yes"

    with pytest.raises(TypeError, match="reads_rows must be True or False"):
        describe(Wrong)
