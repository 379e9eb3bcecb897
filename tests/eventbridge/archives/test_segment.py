"""One archive segment file: batches appended and read back, a torn or damaged tail cut back to the last whole
batch when the file is opened again, a sealed segment opened by its seal, and generated batches round-tripping
through the file."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventbridge.archives.record import HEADER_SIZE, ArchivedEvent, ArchiveFormatError, encode_commit, encode_event
from eventbridge.archives.segment import ArchiveSegment, segment_base, segment_name


def event(n: int, size: int = 20) -> ArchivedEvent:
    return ArchivedEvent(n % 4, n, 1_700_000_000_000 + n, 1_600_000_000_000 + n, f"{{'n':{n}}}".encode().ljust(size))


def all_events(segment: ArchiveSegment, max_bytes: int = 1 << 20) -> list[ArchivedEvent]:
    found, position = [], HEADER_SIZE
    while position < segment.committed:
        batch, position = segment.read_events(position, segment.committed, max_bytes)
        found += batch
    return found


def test_batches_are_read_back_in_order_and_reopened_with_their_positions(tmp_path: Path) -> None:
    segment = ArchiveSegment.create(tmp_path, 0, "default", {0: 5, 1: 7})
    assert segment.path.name == "00000000000000000000.seg" and segment_base(segment.path) == 0
    assert not list(tmp_path.glob(".*"))  # the temporary file was renamed
    first, second = [event(n) for n in range(3)], [event(n) for n in range(3, 10)]
    segment.append(first, {0: 8, 1: 7})
    segment.append(second, {0: 12, 1: 11, 2: 1})
    segment.append([], {0: 13, 1: 11, 2: 1})  # only the positions moved: nothing matched
    assert all_events(segment) == first + second
    assert all_events(segment, max_bytes=1) == first + second  # one record per read
    assert segment.summary.events == 10 and segment.summary.max_store_ms == 1_700_000_000_009
    segment.close()

    again = ArchiveSegment.open(segment.path)
    assert (again.committed, again.positions, again.sealed) == (segment.committed, {0: 13, 1: 11, 2: 1}, False)
    assert again.summary == segment.summary
    assert again.committed == os.path.getsize(segment.path)


def test_a_torn_last_batch_is_cut_at_every_byte(tmp_path: Path) -> None:
    segment = ArchiveSegment.create(tmp_path, 0, "default", {0: 0})
    segment.append([event(1), event(2)], {0: 3})
    whole = segment.committed
    segment.append([event(3), event(4, size=300)], {0: 5})
    segment.close()
    data = segment.path.read_bytes()
    for cut in range(whole, len(data)):
        segment.path.write_bytes(data[:cut])
        again = ArchiveSegment.open(segment.path)
        assert (again.committed, again.positions, again.summary.events) == (whole, {0: 3}, 2), cut
        assert os.path.getsize(segment.path) == whole
        assert all_events(again) == [event(1), event(2)]


def test_a_damaged_or_unfinished_tail_is_cut_and_appending_goes_on_after_it(tmp_path: Path) -> None:
    segment = ArchiveSegment.create(tmp_path, 0, "default", {0: 0})
    segment.append([event(1)], {0: 2})
    whole = segment.committed
    segment.close()
    with open(segment.path, "ab") as file:  # a batch written without its commit: its fsync never came
        file.write(encode_event(event(2)) + encode_event(event(3)))
    again = ArchiveSegment.open(segment.path)
    assert (again.committed, again.summary.events) == (whole, 1)
    again.append([event(2)], {0: 3})
    with open(segment.path, "r+b") as file:  # a flipped bit in that batch's commit
        file.seek(again.committed - 3)
        byte = file.read(1)
        file.seek(again.committed - 3)
        file.write(bytes([byte[0] ^ 0x10]))
    again.close()
    third = ArchiveSegment.open(segment.path)
    assert (third.committed, third.positions) == (whole, {0: 2})
    assert all_events(third) == [event(1)]


def test_a_segment_without_a_whole_commit_or_header_is_refused(tmp_path: Path) -> None:
    segment = ArchiveSegment.create(tmp_path, 0, "default", {0: 0})
    segment.path.write_bytes(segment.path.read_bytes()[: HEADER_SIZE + 4])
    with pytest.raises(ArchiveFormatError, match="no whole COMMIT"):
        ArchiveSegment.open(segment.path)
    segment.path.write_bytes(b"x" * 100)
    with pytest.raises(ArchiveFormatError, match="not an archive segment"):
        ArchiveSegment.open(segment.path)


def test_a_sealed_segment_is_opened_by_its_seal_and_its_positions_found_by_reading(tmp_path: Path) -> None:
    segment = ArchiveSegment.create(tmp_path, 40, "shop", {0: 0})
    segment.append([event(n) for n in range(5)], {0: 5, 1: 2})
    segment.seal()
    with pytest.raises(ValueError, match="sealed"):
        segment.append([event(9)], {0: 9})
    again = ArchiveSegment.open(tmp_path / segment_name(40))
    assert (again.sealed, again.bus, again.summary, again.positions) == (True, "shop", segment.summary, None)
    assert again.size == os.path.getsize(again.path) and again.next_base == 45
    assert again.last_positions() == {0: 5, 1: 2}
    assert all_events(again) == [event(n) for n in range(5)]


def test_an_event_larger_than_a_read_chunk_is_read_whole(tmp_path: Path) -> None:
    segment = ArchiveSegment.create(tmp_path, 0, "default", {})
    big = ArchivedEvent(0, 1, 2, 3, os.urandom(1_500_000))
    segment.append([event(0), big, event(2)], {0: 3})
    assert all_events(segment) == [event(0), big, event(2)]
    segment.close()
    assert ArchiveSegment.open(segment.path).summary.events == 3


def test_a_read_of_a_deleted_segment_says_so(tmp_path: Path) -> None:
    segment = ArchiveSegment.create(tmp_path, 0, "default", {})
    segment.append([event(0)], {0: 1})
    segment.delete()
    with pytest.raises(FileNotFoundError):
        segment.read_events(HEADER_SIZE, segment.committed)


archived_events = st.builds(
    ArchivedEvent,
    st.integers(0, 3),
    st.integers(0, 2**63),
    st.integers(0, 2**42),
    st.integers(-(2**42), 2**42),
    st.binary(max_size=600),
)
positions = st.dictionaries(st.integers(0, 3), st.integers(0, 2**40), max_size=4)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.lists(archived_events, max_size=12), positions), max_size=6), st.integers(1, 2000))
def test_generated_batches_round_trip_through_the_file(
    batches: list[tuple[list[ArchivedEvent], dict[int, int]]], max_bytes: int
) -> None:
    with tempfile.TemporaryDirectory() as directory:
        segment = ArchiveSegment.create(Path(directory), 0, "default", {0: 0})
        for events, moved in batches:
            segment.append(events, moved)
        written = [e for events, _ in batches for e in events]
        assert all_events(segment, max_bytes) == written
        segment.close()
        with open(segment.path, "ab") as file:  # and a torn batch after them
            file.write((encode_event(written[0]) if written else b"") + encode_commit({0: 1})[:-1])
        again = ArchiveSegment.open(segment.path)
        assert all_events(again) == written
        assert again.positions == (batches[-1][1] if batches else {0: 0})
        assert again.summary == segment.summary
