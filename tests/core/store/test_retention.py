import os
import time

import pytest

from core.store.errors import StoreNotWritableError
from core.store.message import Message
from core.store.message_store import GetStatus


def fill(store, count=60, size=60_000):
    """About 3.5 MB over 1 MiB segments, keyed so the index has entries in every segment."""
    for n in range(count):
        store.append(Message(topic="t", body=bytes([n]) * size, properties={"KEYS": f"k{n}"}))
    store.wait_dispatched()
    store.flush()


def age_segments(store, hours):
    old = time.time() - hours * 3600
    for mapped in store.commit_log.files.files[:-1]:
        os.utime(mapped.path, (old, old))


def test_expired_segments_go_and_queues_follow(open_store):
    store = open_store(file_reserved_hours=1, delete_when=time.strftime("%H"))
    fill(store)
    segments = len(store.commit_log.files.files)
    assert segments >= 4
    age_segments(store, 2)
    deleted = store.retention.run_once()
    assert deleted == segments - 1  # all but the one being written
    assert len(store.commit_log.files.files) == 1
    low = store.min_offset("t", 0)
    assert 0 < low < 60
    old = store.get_messages("t", 0, 0)
    assert old.status is GetStatus.OFFSET_TOO_SMALL and old.next_begin_offset == low
    first = store.get_messages("t", 0, low).messages[0]
    assert first.body == bytes([low]) * 60_000
    assert first.commit_log_offset >= store.commit_log.min_offset
    assert store.query_messages("t", "k0") == []
    assert [m.body[:1] for m in store.query_messages("t", "k59")] == [bytes([59])]


def test_nothing_goes_before_its_time_or_outside_delete_when(open_store):
    hour = (int(time.strftime("%H")) + 12) % 24
    store = open_store(file_reserved_hours=1, delete_when=f"{hour:02d}")
    fill(store)
    age_segments(store, 2)
    assert store.retention.run_once() == 0  # expired, but not the hour
    assert store.delete_expired_files() > 0  # an operator's manual run ignores the hour
    fresh = open_store(store.config.store_dir.parent / "fresh", file_reserved_hours=1, delete_when=f"{hour:02d}")
    fill(fresh)
    assert fresh.delete_expired_files() == 0  # not expired


def test_disk_over_clean_ratio_deletes_oldest_even_unexpired(open_store):
    store = open_store(disk_clean_ratio=0.001, disk_warn_ratio=0.999, disk_refuse_ratio=1.0)
    fill(store)
    assert len(store.commit_log.files.files) >= 4
    assert store.retention.run_once() >= 3
    assert len(store.commit_log.files.files) == 1
    assert store.writable


def test_writes_refused_over_refuse_ratio_reads_still_served(open_store):
    store = open_store(disk_clean_ratio=0.0005, disk_warn_ratio=0.0005, disk_refuse_ratio=0.001)
    # open() checked the disk: this file system is more than 0.1% used.
    with pytest.raises(StoreNotWritableError, match="disk_refuse_ratio"):
        store.append(Message(topic="t", body=b"x"))
    assert store.get_messages("t", 0, 0).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
