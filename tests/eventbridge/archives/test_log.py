"""An archive's directory of segments: rolling by UTC day and by size, retention of its own by store time, reads by
event time across segments in bounded batches, and recovery after a crash in the middle of a roll."""

from __future__ import annotations

from pathlib import Path

import pytest

from eventbridge.archives import log as archive_log
from eventbridge.archives.log import DAY_MS, ArchiveLog
from eventbridge.archives.record import ArchivedEvent, ArchiveFormatError
from eventbridge.archives.segment import ArchiveSegment

# 2024-05-01T00:00:00Z
DAY0_MS = 1_714_521_600_000


def event(n: int, store_ms: int, event_ms: int | None = None) -> ArchivedEvent:
    return ArchivedEvent(n % 4, n, store_ms, store_ms if event_ms is None else event_ms, b'{"id":"e%d"}' % n)


async def read_all(log: ArchiveLog, from_ms: int = 0, to_ms: int = 2**62, batch: int = 1000) -> list[list[int]]:
    return [[e.queue_offset for e in events] async for events in log.read(from_ms, to_ms, batch)]


def segment_names(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())


async def test_a_new_archive_rolls_by_day_and_reopens_with_its_positions(tmp_path: Path) -> None:
    directory = tmp_path / "orders"
    assert not ArchiveLog.exists(directory)
    log = ArchiveLog.create(directory, "shop", {0: 10, 1: 20})
    assert ArchiveLog.exists(directory) and log.positions == {0: 10, 1: 20}
    log.append([event(1, DAY0_MS + 5), event(2, DAY0_MS + 6)], {0: 12, 1: 20})
    log.append([event(3, DAY0_MS + DAY_MS + 1)], {0: 13, 1: 20})  # the next UTC day: a new segment
    log.append([event(4, DAY0_MS + DAY_MS + 2)], {0: 13, 1: 21})
    assert segment_names(directory) == ["00000000000000000000.seg", "00000000000000000002.seg"]
    assert log.segments[0].sealed and not log.active.sealed
    stats = log.stats()
    assert (stats.events, stats.segments, stats.oldest_event_ms, stats.newest_event_ms) == (
        4,
        2,
        DAY0_MS + 5,
        DAY0_MS + DAY_MS + 2,
    )
    assert stats.size_bytes == sum(path.stat().st_size for path in directory.iterdir())
    log.close()

    again = ArchiveLog.open(directory)
    assert (again.bus, again.positions, again.stats()) == ("shop", {0: 13, 1: 21}, stats)
    assert await read_all(again) == [[1, 2, 3, 4]]


async def test_segments_roll_by_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(archive_log, "SEGMENT_MAX_BYTES", 400)
    log = ArchiveLog.create(tmp_path / "a", "default", {})
    for n in range(20):
        log.append([event(n, DAY0_MS + n)], {0: n + 1})
    assert len(log.segments) > 3 and all(segment.size <= 400 for segment in log.segments)
    assert await read_all(log) == [list(range(20))]
    assert log.stats().events == 20


async def test_retention_deletes_whole_segments_whose_newest_event_expired(tmp_path: Path) -> None:
    log = ArchiveLog.create(tmp_path / "a", "default", {0: 0})
    for day in range(4):  # one segment a day, two events each
        log.append([event(2 * day, DAY0_MS + day * DAY_MS), event(2 * day + 1, DAY0_MS + day * DAY_MS + 10)], {0: day})
    assert len(log.segments) == 4
    now = DAY0_MS + 3 * DAY_MS + 5  # day 0's newest event (at +10 ms) is 5 ms short of 3 days old
    assert log.enforce_retention(now, 0) == 0  # 0 keeps everything
    assert log.enforce_retention(now, 3) == 0
    assert log.enforce_retention(now + 10, 3) == 2  # now it is older than 3 days: day 0's segment goes
    assert [e for batch in await read_all(log) for e in batch] == [2, 3, 4, 5, 6, 7]
    # Everything expired: the active segment is rolled first, so the positions stay on disk.
    assert log.enforce_retention(now + 10 * DAY_MS, 3) == 6
    assert log.stats().events == 0 and len(log.segments) == 1 and log.positions == {0: 3}
    log.close()
    assert ArchiveLog.open(tmp_path / "a").positions == {0: 3}


async def test_reads_select_by_event_time_in_bounded_batches(tmp_path: Path) -> None:
    log = ArchiveLog.create(tmp_path / "a", "default", {})
    # Event times out of order with store times, and spread over two segments (two days).
    times = [500, 100, 300, 900, 200, 700]
    log.append([event(n, DAY0_MS + n, times[n]) for n in range(3)], {0: 3})
    log.append([event(n, DAY0_MS + DAY_MS + n, times[n]) for n in range(3, 6)], {0: 6})
    assert await read_all(log, 200, 700, batch=2) == [[0, 2], [4, 5]]
    assert await read_all(log, 0, 150) == [[1]]  # the second segment (200..900) is not read at all
    assert await read_all(log, 1000, 2000) == []
    assert await read_all(log, 900, 900) == [[3]]


async def test_a_read_skips_a_segment_deleted_meanwhile(tmp_path: Path) -> None:
    log = ArchiveLog.create(tmp_path / "a", "default", {})
    log.append([event(0, DAY0_MS)], {0: 1})
    log.append([event(1, DAY0_MS + DAY_MS)], {0: 2})
    reader = log.read(0, 2**62, 1)
    assert [e.queue_offset for e in await anext(reader)] == [0]
    log.enforce_retention(DAY0_MS + DAY_MS + 10 * DAY_MS, 1)  # both expire
    assert [batch async for batch in reader] == []


async def test_a_crash_between_sealing_and_the_next_segment_is_recovered(tmp_path: Path) -> None:
    directory = tmp_path / "a"
    log = ArchiveLog.create(directory, "default", {0: 0})
    log.append([event(0, DAY0_MS), event(1, DAY0_MS + 1)], {0: 2, 1: 5})
    log.active.seal()  # ... and the process dies before the next segment exists
    (directory / ".00000000000000000002.seg.tmp").write_bytes(b"half a segment")
    again = ArchiveLog.open(directory)
    assert segment_names(directory) == ["00000000000000000000.seg", "00000000000000000002.seg"]
    assert again.positions == {0: 2, 1: 5} and not again.active.sealed
    again.append([event(2, DAY0_MS + 2)], {0: 3, 1: 5})
    assert [e for batch in await read_all(again) for e in batch] == [0, 1, 2]


def test_segments_of_another_bus_are_refused(tmp_path: Path) -> None:
    directory = tmp_path / "a"
    log = ArchiveLog.create(directory, "default", {})
    log.append([event(0, DAY0_MS)], {0: 1})
    log.active.seal()
    ArchiveSegment.create(directory, 1, "other", {0: 1}).close()
    with pytest.raises(ArchiveFormatError, match="bus 'default'"):
        ArchiveLog.open(directory)
    log.delete()
    assert not directory.exists()
