"""Recovery after unclean stops: a real child process is killed, then the store is opened here."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.store.checkpoint import Checkpoint, CheckpointFile
from core.store.errors import CorruptRecordError
from core.store.message import Message
from core.store.message_store import GetStatus

from .conftest import SMALL

ROOT = Path(__file__).resolve().parents[3]


def write_then_die(directory: Path, count: int, sync: bool = True) -> None:
    """A child appends `count` messages (bodies b'msg-<n>', key k<n>) and SIGKILLs itself: no close, abort stays."""
    code = textwrap.dedent(f"""
        import asyncio, os, signal
        from core.store.config import FlushMode, StoreConfig
        from core.store.message import Message
        from core.store.message_store import MessageStore
        store = MessageStore(StoreConfig(store_dir={str(directory)!r},
                             flush_mode=FlushMode.{"SYNC_FLUSH" if sync else "ASYNC_FLUSH"}, **{SMALL!r}))
        store.open()
        async def main():
            for n in range({count}):
                await store.put(Message(topic="t", body=b"msg-%d" % n, queue_id=n % 2,
                                        properties={{"KEYS": "k%d" % n}}))
        asyncio.run(main())
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert result.returncode == -signal.SIGKILL, result.stderr
    assert (directory / "abort").exists()


def bodies(store, queue_id=None):
    out = []
    for q in [queue_id] if queue_id is not None else [0, 1]:
        got = store.get_messages("t", q, store.min_offset("t", q), max_count=10_000)
        out += [m.body for m in got.messages]
    return sorted(out, key=lambda b: int(b.split(b"-")[1]))


def segment(directory: Path) -> Path:
    return sorted((directory / "commitlog").iterdir())[-1]


def test_sigkill_after_sync_puts_loses_nothing(open_store, tmp_path):
    directory = tmp_path / "store"
    write_then_die(directory, 300)
    store = open_store(directory)
    assert store.recovery.clean is False
    assert bodies(store) == [b"msg-%d" % n for n in range(300)]
    assert len(store.query_messages("t", "k123")) == 1
    assert store.append(Message(topic="t", body=b"after", queue_id=1)).queue_offset == 150


def test_torn_tail_is_cut_and_the_store_writes_on(open_store, tmp_path):
    directory = tmp_path / "store"
    write_then_die(directory, 50)
    path = segment(directory)
    end_before = open_store(directory).commit_log.write_pos
    open_store(tmp_path / "elsewhere")  # closes the first
    # Simulate a record torn by a power cut: a plausible header and half a body after the last record.
    with open(path, "r+b") as f:
        f.seek(end_before)
        f.write((400).to_bytes(4, "big") + (0x4D514701).to_bytes(4, "big") + os.urandom(100))
    # The clean close above removed the abort marker; a crash would have left it.
    (directory / "abort").touch()
    store = open_store(directory)
    assert store.recovery.clean is False
    assert store.recovery.truncated_bytes == 108
    assert store.commit_log.write_pos == end_before
    assert bodies(store) == [b"msg-%d" % n for n in range(50)]
    store.append(Message(topic="t", body=b"msg-50", queue_id=0))
    store.wait_dispatched()
    assert bodies(store)[-1] == b"msg-50"


@pytest.fixture
def open_store(open_store):
    """Opening a store closes the one opened before (as a restart does)."""
    stores = []

    def _open(directory=None, **overrides):
        for store in stores:
            store.close()
        store = open_store(directory, **overrides)
        stores.append(store)
        return store

    return _open


def flip_body_byte(directory: Path, body: bytes) -> int:
    path = segment(directory)
    data = path.read_bytes()
    at = data.index(body)
    with open(path, "r+b") as f:
        f.seek(at + 2)
        f.write(bytes([data[at + 2] ^ 0xFF]))
    return at


def test_corrupt_record_is_reported_with_file_and_offset_never_returned(open_store, tmp_path):
    directory = tmp_path / "store"
    write_then_die(directory, 40)
    open_store(directory)  # recover once, close cleanly
    at = flip_body_byte(directory, b"msg-17")
    store = open_store(directory)
    got = store.get_messages("t", 1, 0, max_count=100)
    assert got.status is GetStatus.FOUND
    assert b"msg-17" not in [m.body for m in got.messages]
    assert len(got.messages) == 19
    [(queue_offset, error)] = got.corrupt
    assert queue_offset == 8
    assert isinstance(error, CorruptRecordError)
    assert error.path.endswith(segment(directory).name) and "CRC" in error.reason
    assert error.file_offset <= at < error.file_offset + 200


def test_corrupt_record_in_the_middle_is_skipped_by_recovery_not_truncated(open_store, tmp_path):
    directory = tmp_path / "store"
    write_then_die(directory, 40)
    flip_body_byte(directory, b"msg-17")
    store = open_store(directory)
    report = store.recovery
    assert report.clean is False
    assert len(report.corrupt) == 1
    path, _, skipped = report.corrupt[0]
    assert path.endswith(segment(directory).name) and skipped > 0
    # Everything after the corrupt record survives: the log was not cut there.
    assert bodies(store) == [b"msg-%d" % n for n in range(40) if n != 17]


def test_consume_queue_entries_past_a_lost_tail_are_dropped(open_store, tmp_path):
    directory = tmp_path / "store"
    write_then_die(directory, 30)
    store = open_store(directory)
    last = store.get_messages("t", 1, 14).messages[0]
    assert last.body == b"msg-29"
    end = store.commit_log.write_pos
    store_path = segment(directory)
    store.close()
    # Under async flush the consume queue can reach the disk before the log: the checkpoint then says the log
    # is flushed up to the last record, and queue entries past it exist. A power cut loses the last record.
    with open(store_path, "r+b") as f:
        f.seek(last.commit_log_offset)
        f.write(bytes(end - last.commit_log_offset))
    checkpoint = CheckpointFile(directory / "checkpoint")
    checkpoint.load()
    checkpoint.save(Checkpoint(commit_log_flushed=last.commit_log_offset, dispatched=end, index_flushed=end))
    checkpoint.close()
    (directory / "abort").touch()
    store = open_store(directory)
    assert store.recovery.consume_queue_entries_dropped == 1
    assert store.max_offset("t", 1) == 14
    assert bodies(store) == [b"msg-%d" % n for n in range(29)]
    assert store.append(Message(topic="t", body=b"msg-29b", queue_id=1)).queue_offset == 14


def test_a_consume_queue_hole_never_yields_another_queues_message(open_store, tmp_path):
    directory = tmp_path / "store"
    write_then_die(directory, 20)
    store = open_store(directory)
    queue = store.queues.get("t", 1)
    # Entry 3 of queue t/1 lost (a hole of zeros), and entry 5 pointing at a record of queue t/0.
    pos = 3 * 20
    mapped = queue.files.find(pos)
    mapped.mm[pos : pos + 20] = bytes(20)
    other = store.get_messages("t", 0, 0).messages[0]
    from core.store.queues.consume_queue import ENTRY

    ENTRY.pack_into(mapped.mm, 5 * 20, other.commit_log_offset, other.store_size, 0)
    got = store.get_messages("t", 1, 0, max_count=100)
    bodies = [m.body for m in got.messages]
    assert b"msg-7" not in bodies  # queue offset 3 of t/1 holds msg-7: skipped, not replaced
    assert b"msg-0" not in bodies  # the record of t/0 is not handed out as t/1's
    assert [q for q, _ in got.corrupt] == [5]
    assert len(bodies) == 8
