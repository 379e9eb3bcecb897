"""SYNC_FLUSH keeps the log written with zeros ahead of its write position (StoreConfig.sync_warm_bytes, the
flush service's SegmentWarmer): the blocks are allocated at open, zeros never land on records, and every record
reads back, from the ring while the store runs and from the segments once it is opened again."""

import os
import random
import threading

import pytest

from core.store.config import FlushMode, StoreConfig
from core.store.message import Message
from core.store.put_result import PutStatus
from tests.core.store.conftest import small_config

MiB = 1024 * 1024


def allocated(path):
    return os.stat(path).st_blocks * 512


def segments(store_dir):
    return sorted((store_dir / "commitlog").iterdir())


def test_a_sync_flush_store_opens_with_the_log_warm_ahead_and_an_async_one_does_not(open_store, tmp_path):
    sync = {"flush_mode": FlushMode.SYNC_FLUSH, "segment_size": 16 * MiB, "sync_warm_bytes": 2 * MiB}
    store = open_store(tmp_path / "sync", **sync)
    (segment,) = segments(tmp_path / "sync")
    assert allocated(segment) >= 2 * MiB  # zeros written, not a hole
    assert store.put_blocking(Message("t", b"x")).status is PutStatus.PUT_OK
    open_store(tmp_path / "async", segment_size=16 * MiB)
    assert segments(tmp_path / "async") == []  # made at the first append, sparse


def test_sync_warm_bytes_zero_turns_it_off(open_store, tmp_path):
    store = open_store(tmp_path / "s", flush_mode=FlushMode.SYNC_FLUSH, segment_size=16 * MiB, sync_warm_bytes=0)
    assert store.warmer is None
    assert segments(tmp_path / "s") == []


def test_a_negative_sync_warm_bytes_is_refused(tmp_path):
    with pytest.raises(ValueError, match="sync_warm_bytes -1: must be 0"):
        StoreConfig(store_dir=tmp_path, sync_warm_bytes=-1)


def test_zeros_written_ahead_never_land_on_records(open_store, tmp_path):
    # Segments of 1 MiB and 512 KiB kept warm: the warmer works through every segment while eight writers append
    # records of random sizes, across many segment rolls.
    config = {"flush_mode": FlushMode.SYNC_FLUSH, "sync_warm_bytes": 512 * 1024}
    store = open_store(tmp_path / "s", **config)
    rng = random.Random(7)
    bodies = {(writer, n): rng.randbytes(rng.randint(50, 6000)) for writer in range(8) for n in range(300)}
    errors = []

    def write(writer):
        try:
            for n in range(300):
                result = store.put_blocking(Message("t", bodies[(writer, n)], writer % 4, {"K": f"{writer}-{n}"}))
                assert result.status is PutStatus.PUT_OK
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(writer,)) for writer in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(segments(tmp_path / "s")) > 4

    def read_all(reading):
        found = {}
        for queue_id in range(4):
            offset = 0
            while True:
                got = reading.get_messages("t", queue_id, offset, max_count=64)
                if not got.messages:
                    break
                assert not got.corrupt
                for message in got.messages:
                    writer, n = map(int, message.properties["K"].split("-"))
                    found[(writer, n)] = message.body
                offset = got.next_begin_offset
        return found

    assert store.wait_dispatched()
    assert read_all(store) == bodies  # while it runs (recent records from the write ring)
    store.close()
    reopened = open_store(tmp_path / "s", **config)
    assert read_all(reopened) == bodies  # from the segments, every CRC checked


def test_the_warm_step_writes_only_past_the_committed_position(tmp_path):
    # CommitLog.warm directly: whatever it is asked, the bytes below the committed position stay the records'.
    from core.store.message_store import MessageStore

    store = MessageStore(small_config(tmp_path / "s", flush_mode=FlushMode.SYNC_FLUSH, sync_warm_bytes=0))
    store.open()
    try:
        for n in range(50):
            store.put_blocking(Message("t", bytes([n]) * 1000))
        log = store.commit_log
        committed = log.commit()
        before = segments(tmp_path / "s")[0].read_bytes()[:committed]
        while log.warming.warm(4 * MiB):
            pass
        after = segments(tmp_path / "s")[0].read_bytes()
        assert after[:committed] == before
        assert log.warming.ahead >= MiB - committed  # to the end of the 1 MiB segment, the next not made yet
        assert after[committed:] == bytes(len(after) - committed)
    finally:
        store.close()
