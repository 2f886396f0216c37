"""The packed buffers, against the examples of wit/flat-state.wit."""

import pytest

from weir_sdk import Change, Record, flat


def test_keys_pack_as_wit_flat_state_says():
    assert flat.pack_keys([b"a", b"bc"]) == bytes.fromhex("01000000 61 02000000 6263")
    assert flat.unpack_keys(flat.pack_keys([b"a", b"", b"bc"])) == [b"a", b"", b"bc"]


def test_values_and_entries_pack_as_wit_flat_state_says():
    reply = bytes.fromhex("01000000 37 ffffffff")
    assert flat.pack_values([b"7", None]) == reply
    assert flat.unpack_values(reply, 2) == [b"7", None]
    entries = bytes.fromhex("01000000 01000000 61 37 02000000 ffffffff 6263")
    assert flat.pack_entries([(b"a", b"7"), (b"bc", None)]) == entries
    assert flat.unpack_entries(entries) == [(b"a", b"7"), (b"bc", None)]


def test_a_reply_with_bytes_left_over_is_an_error():
    with pytest.raises(ValueError, match="left over"):
        flat.unpack_values(bytes.fromhex("01000000 37 00"), 1)
    with pytest.raises(ValueError, match="past the end"):
        flat.unpack_entries(bytes.fromhex("05000000 01000000 61"))


def test_records_round_trip_through_flat_batches():
    recs = [
        Record(b"v1"),
        Record(b"", key=b"k", timestamp=-5),
        Record("ü", key="", timestamp=2**63 - 1),
    ]
    data, spans = flat.pack_records(recs)
    assert len(spans) == 32 * len(recs)
    assert flat.records(data, spans) == recs
    # Span layout (wit/flat.wit): value offset/length, key offset/length,
    # flags (1 key, 2 timestamp), reserved, timestamp.
    assert flat.SPAN.unpack_from(spans, 32) == (2, 0, 2, 1, 3, 0, -5)


def test_change_kinds_travel_in_bits_2_to_5_of_the_flags():
    recs = [Record(b"v", key=b"k", change=kind) for kind in Change]
    data, spans = flat.pack_records(recs)
    assert flat.records(data, spans) == recs
    flags = [flat.SPAN.unpack_from(spans, 32 * i)[4] for i in range(len(recs))]
    assert flags == [1 | (kind << 2) for kind in range(5)]
    assert Record(b"v", change=Change.DELETE) != Record(b"v")
    assert Record(b"v", change=Change.DELETE).with_key(b"k").change == Change.DELETE
    assert [c for c in Change if c.retracts()] == [
        Change.UPDATE_BEFORE,
        Change.DELETE,
        Change.TRUNCATE,
    ]
