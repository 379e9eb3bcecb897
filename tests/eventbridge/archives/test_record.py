"""The byte layout of archive segments, pure: records and headers round-trip, and every damaged record is refused
rather than read as something else."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventbridge.archives.record import (
    FRAME_SIZE,
    HEADER_SIZE,
    SEAL_RECORD_SIZE,
    ArchivedEvent,
    ArchiveFormatError,
    Commit,
    SegmentSummary,
    decode_header,
    decode_record,
    encode_commit,
    encode_event,
    encode_header,
    encode_seal,
)

U32 = st.integers(0, 2**32 - 1)
U64 = st.integers(0, 2**64 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)

events = st.builds(ArchivedEvent, U32, U64, I64, I64, st.binary(max_size=3000))
commits = st.builds(Commit, st.dictionaries(U32, U64, max_size=8))
summaries = st.builds(SegmentSummary, U64, U64, I64, I64, I64, I64)
records = st.one_of(events, commits, summaries)


def encode(record: ArchivedEvent | Commit | SegmentSummary) -> bytes:
    if isinstance(record, ArchivedEvent):
        return encode_event(record)
    if isinstance(record, Commit):
        return encode_commit(record.positions)
    return encode_seal(record)


@given(st.lists(records, max_size=20))
def test_records_round_trip_one_after_another(written: list[ArchivedEvent | Commit | SegmentSummary]) -> None:
    data = b"".join(encode(record) for record in written)
    position, read = 0, []
    while position < len(data):
        record, position = decode_record(data, position)
        read.append(record)
    assert read == written


@given(records, st.data())
def test_a_torn_or_damaged_record_is_refused(
    record: ArchivedEvent | Commit | SegmentSummary, data: st.DataObject
) -> None:
    encoded = encode(record)
    cut = data.draw(st.integers(0, len(encoded) - 1), label="cut")
    with pytest.raises(ArchiveFormatError):
        decode_record(encoded[:cut])
    at = data.draw(st.integers(0, len(encoded) - 1), label="flipped byte")
    bit = data.draw(st.integers(0, 7), label="bit")
    damaged = bytearray(encoded)
    damaged[at] ^= 1 << bit
    try:
        decoded, end = decode_record(bytes(damaged))
    except ArchiveFormatError:
        return
    # A flip in the length field can only pass if it still frames a record with a valid CRC: never a different
    # record of the same bytes.
    raise AssertionError(f"a flipped bit at {at} was read as {decoded!r} ending at {end}")


def test_a_seal_has_its_fixed_size_and_a_header_names_its_bus() -> None:
    assert len(encode_seal(SegmentSummary(3, 10, 1, 2, 3, 4))) == SEAL_RECORD_SIZE
    header = encode_header("plant_a-1")
    assert len(header) == HEADER_SIZE and decode_header(header) == "plant_a-1"
    with pytest.raises(ArchiveFormatError, match="CRC"):
        decode_header(header[:20] + b"X" + header[21:])
    with pytest.raises(ArchiveFormatError, match="not an archive segment"):
        decode_header(b"\0" * HEADER_SIZE)
    with pytest.raises(ArchiveFormatError, match="record length 0"):
        decode_record(b"\0" * FRAME_SIZE)


def test_summary_spans_the_events_it_was_given() -> None:
    summary = SegmentSummary()
    for event_ms, store_ms in [(50, 7), (10, 9), (30, 8)]:
        summary.add(ArchivedEvent(0, 0, store_ms, event_ms, b"abc"))
    assert summary == SegmentSummary(3, 9, 10, 50, 7, 9)
