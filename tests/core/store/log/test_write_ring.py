"""The write ring (core.store.log.write_ring): appends land in it and reach the segments by `commit`; a record
acknowledged but not yet committed when the process dies is restored from it at the next open."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.store.config import StoreConfig
from core.store.log.record_codec import decode_record
from core.store.log.write_ring import HEADER_PAGE, WRITE_RING_FILE
from core.store.message import Message
from core.store.message_store import GetStatus, MessageStore
from tests.compiled_modules import is_compiled, pure_twin

ROOT = Path(__file__).resolve().parents[4]

# 64 KiB segments and a 128 KiB ring: records of 3 KiB roll segments and wrap the ring within a few dozen.
TINY = {
    "segment_size": 64 * 1024,
    "max_message_size": 8 * 1024,
    "write_ring_size": 128 * 1024,
    "cq_entries_per_file": 1000,
    "index_slots": 256,
    "index_entries": 4096,
}


def body(n: int) -> bytes:
    return (b"%06d" % n) * 500  # 3,000 bytes


def kill_with_records_in_the_ring(directory: Path, committed: int, held: int, ring_size: int) -> None:
    """A child appends `committed` messages and lets the dispatcher commit them, then keeps the commit lock (so no
    thread can write the ring out) while it appends `held` more, each acknowledged, and SIGKILLs itself."""
    config = {**TINY, "write_ring_size": ring_size}
    code = textwrap.dedent(f"""
        import os, signal
        from core.store.config import StoreConfig
        from core.store.message import Message
        from core.store.message_store import MessageStore
        store = MessageStore(StoreConfig(store_dir={str(directory)!r}, **{config!r}))
        store.open()
        for n in range({committed}):
            store.append(Message(topic="t", body=(b"%06d" % n) * 500, queue_id=n % 2))
        assert store.wait_dispatched(timeout=10)
        log = store.commit_log
        log.commit_lock.acquire()
        start = log.committed_pos
        for n in range({committed}, {committed + held}):
            store.append(Message(topic="t", body=(b"%06d" % n) * 500, queue_id=n % 2))
        assert log.committed_pos == start < log.write_pos
        print(start, log.write_pos, flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == -signal.SIGKILL, result.stderr
    start, end = map(int, result.stdout.split())
    assert end - start > held * 3000  # all of them past the committed position
    # The held records are in the ring only: their part of the segments is still zeros.
    segment = directory / "commitlog" / f"{start - start % (64 * 1024):020d}"
    with open(segment, "rb") as f:
        f.seek(start % (64 * 1024))
        assert f.read(64) == bytes(64)


def all_bodies(store: MessageStore) -> list[bytes]:
    bodies: dict[int, bytes] = {}
    for queue_id in (0, 1):
        got = store.get_messages("t", queue_id, 0, max_count=1000, max_bytes=10**9)
        assert got.status is GetStatus.FOUND
        for message in got.messages:
            bodies[int(message.body[:6])] = message.body
    return [bodies[n] for n in sorted(bodies)]


def test_records_acknowledged_but_not_committed_are_restored_after_sigkill(tmp_path):
    directory = tmp_path / "store"
    # 30 records committed take the ring past its end once; the 35 held (105 KB) wrap it and roll a segment.
    kill_with_records_in_the_ring(directory, committed=30, held=35, ring_size=128 * 1024)
    store = MessageStore(StoreConfig(store_dir=directory, **TINY))  # type: ignore[arg-type]
    report = store.open()
    try:
        assert not report.clean
        assert all_bodies(store) == [body(n) for n in range(65)]
        # The log goes on from there: new records follow the restored ones.
        store.append(Message(topic="t", body=body(65), queue_id=1))
        assert store.wait_dispatched(timeout=10)
        assert all_bodies(store) == [body(n) for n in range(66)]
    finally:
        store.close()
    store = MessageStore(StoreConfig(store_dir=directory, **TINY))  # type: ignore[arg-type]
    report = store.open()
    try:
        assert report.clean
        assert all_bodies(store) == [body(n) for n in range(66)]
    finally:
        store.close()


def test_a_ring_of_another_size_is_restored_then_made_again_at_the_configured_size(tmp_path):
    directory = tmp_path / "store"
    kill_with_records_in_the_ring(directory, committed=5, held=20, ring_size=96 * 1024)
    store = MessageStore(StoreConfig(store_dir=directory, **{**TINY, "write_ring_size": 256 * 1024}))  # type: ignore[arg-type]
    store.open()
    try:
        assert all_bodies(store) == [body(n) for n in range(25)]
        assert os.path.getsize(directory / WRITE_RING_FILE) == HEADER_PAGE + 256 * 1024
    finally:
        store.close()


def test_appends_many_times_the_ring_come_back_whole(open_store):
    """Records that wrap the ring and find it full (the appender then commits itself) read back byte for byte."""
    store = open_store(**TINY)
    sizes = [100, 3000, 8000, 17, 5000, 64]
    sent = []
    for n in range(600):  # about 1.9 MB through a 128 KiB ring
        payload = (b"%06d" % n) * (sizes[n % len(sizes)] // 6 + 1)
        sent.append(payload)
        store.append(Message(topic="t", body=payload, queue_id=0))
    batch = [Message(topic="t", body=(b"%06d" % n) * 700, queue_id=0) for n in range(600, 700)]
    sent.extend(message.body for message in batch)
    store.append_batch(batch)
    assert store.wait_dispatched(timeout=10)
    got = store.get_messages("t", 0, 0, max_count=1000, max_bytes=10**9)
    assert [message.body for message in got.messages] == sent


def test_a_message_is_readable_by_its_offset_before_the_dispatcher_commits_it(open_store):
    store = open_store(**TINY)
    log = store.commit_log
    with log.commit_lock:  # the dispatcher cannot commit meanwhile
        result = store.append(Message(topic="t", body=b"fresh", queue_id=0))
        assert log.committed_pos <= result.commit_log_offset
    assert store.read_message(result.commit_log_offset).body == b"fresh"  # from the ring
    # A read of the segment itself writes the ring out first.
    assert log.store_timestamp_at(result.commit_log_offset) == result.store_timestamp
    assert log.committed_pos > result.commit_log_offset


def test_a_ring_smaller_than_a_record_is_refused_with_what_it_needs(tmp_path):
    with pytest.raises(ValueError, match=r"write_ring_size 65536 cannot hold a record of max_message_size 8192"):
        StoreConfig(store_dir=tmp_path, **{**TINY, "write_ring_size": 64 * 1024})  # type: ignore[arg-type]


def test_a_file_that_is_not_a_ring_stops_the_open_with_its_name(tmp_path):
    directory = tmp_path / "store"
    directory.mkdir()
    (directory / WRITE_RING_FILE).write_bytes(b"not a ring" * 1000)
    store = MessageStore(StoreConfig(store_dir=directory, **TINY))  # type: ignore[arg-type]
    with pytest.raises(OSError, match=r"commitlog.ring: not a write ring"):
        store.open()


# --- the compiled commit log and write ring against their pure twins -----------------------------------------

pure_store = pure_twin("core.store.message_store")


def test_the_ring_twins_are_apart():
    assert is_compiled("core.store.log.write_ring") and is_compiled("core.store.log.commit_log")
    assert pure_store.MessageStore is not MessageStore


record_sizes = st.lists(
    st.one_of(
        st.tuples(st.just("one"), st.integers(0, 8000)),
        st.tuples(st.just("batch"), st.lists(st.integers(0, 3000), min_size=1, max_size=12)),
    ),
    min_size=1,
    max_size=60,
)


def run_appends(store_class, directory: Path, operations) -> tuple[list[tuple[int, int]], list[bytes]]:
    """(commit-log offset and size of each record, the bodies read back) after `operations`."""
    store = store_class(StoreConfig(store_dir=directory, **TINY))  # type: ignore[arg-type]
    store.open()
    try:
        placed = []
        n = 0
        for kind, sizes in operations:
            messages = []
            for size in [sizes] if kind == "one" else sizes:
                messages.append(Message(topic="t", body=(b"%06d" % n) * (size // 6 + 1), queue_id=0))
                n += 1
            results = [store.append(messages[0])] if kind == "one" else store.append_batch(messages)
            placed.extend((result.commit_log_offset, result.size) for result in results)
        assert store.wait_dispatched(timeout=10)
        got = store.get_messages("t", 0, 0, max_count=10_000, max_bytes=10**9)
        return placed, [message.body for message in got.messages]
    finally:
        store.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(record_sizes)
def test_the_compiled_ring_writes_the_log_its_pure_twin_writes(tmp_path, operations):
    run = uuid.uuid4().hex
    compiled = run_appends(MessageStore, tmp_path / f"c-{run}", operations)
    pure = run_appends(pure_store.MessageStore, tmp_path / f"p-{run}", operations)
    assert compiled == pure
    count = sum(1 if kind == "one" else len(sizes) for kind, sizes in operations)
    assert [int(body[:6]) for body in compiled[1]] == list(range(count))


def test_a_record_read_from_the_ring_is_the_record_in_its_segment(open_store):
    """Recent records are decoded from the ring (in the reading core's cache); what comes back is what the segment
    holds, for records wrapping the ring's end too, and for records the ring no longer holds."""
    store = open_store(**TINY)
    log = store.commit_log
    offsets = []
    for n in range(300):  # about 7 laps of the 128 KiB ring
        result = store.append(Message(topic="t", body=(b"%06d" % n) * (n % 7 * 100 + 1), queue_id=0))
        offsets.append(result.commit_log_offset)
        for back in (0, 3, 40):  # the record just appended, a few before, one the ring has written over
            if len(offsets) > back:
                offset = offsets[-1 - back]
                message = store.read_message(offset)
                log.commit()
                segment = log.files.find(offset)
                assert segment is not None
                assert message == decode_record(segment.view, offset - segment.base, segment.size)


def test_reads_from_the_ring_while_other_threads_append_are_whole(open_store):
    """Two threads append through the 128 KiB ring (wrapping it dozens of times) while this one reads the records
    they have just appended: every read is the record that was appended there."""
    store = open_store(**TINY)
    placed: list[tuple[int, bytes]] = []

    def writer(tag: int) -> None:
        for n in range(400):
            payload = bytes([tag]) + (b"%06d" % n) * (n % 5 * 150 + 1)
            result = store.append(Message(topic="t", body=payload, queue_id=tag))
            placed.append((result.commit_log_offset, payload))

    threads = [threading.Thread(target=writer, args=(tag,)) for tag in (1, 2)]
    for thread in threads:
        thread.start()
    checked = 0
    while any(thread.is_alive() for thread in threads) or checked < len(placed):
        if checked < len(placed):
            offset, payload = placed[checked]
            assert store.read_message(offset).body == payload
            checked += 1
    for thread in threads:
        thread.join()
    assert checked == 800
