"""The index built in a process of its own (StoreConfig.index_process, core.store.index.process): what consumers
can see is found by key and unique id at once; the index survives a clean close, a killed index process and a
killed store process; retention deletes its files through it."""

import fcntl
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import core.store.index.process as index_process
from core.store.checkpoint import CheckpointFile
from core.store.index.process import IndexProcessError
from core.store.message import Message
from tests.core.store.conftest import SMALL

ROOT = Path(__file__).resolve().parents[4]


def keyed(n: int) -> Message:
    return Message("orders", b"x" * 100, n % 2, {"KEYS": f"key-{n} batch-{n // 100}", "UNIQ_KEY": f"id-{n}"})


def found_keys(store, key: str) -> set[str]:
    return {message.properties["KEYS"].split()[0] for message in store.query_messages("orders", key, max_num=64)}


def alive(pid: int) -> bool:
    """Running: not gone, and not a zombie (an orphan whose exit nobody has collected yet)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in status


def test_what_consumers_see_is_found_at_once_by_key_and_by_unique_id(open_store):
    store = open_store(index_process=True)
    assert store.dispatcher.index is None and store.index_process.pid != os.getpid()
    for n in range(500):
        store.append(keyed(n))
    store.wait_dispatched(timeout=10)
    # No wait for the index: a query first has the child index everything visible.
    assert found_keys(store, "key-499") == {"key-499"}
    assert [m.unique_id for m in store.query_messages("orders", "id-0")] == ["id-0"]
    assert found_keys(store, "batch-4") == {f"key-{n}" for n in range(436, 500)}  # the newest 64 of 100
    assert store.query_messages("orders", "key-500") == []


def test_a_clean_close_leaves_the_index_whole_for_an_in_process_index(open_store, tmp_path):
    store = open_store(tmp_path / "s", index_process=True)
    for n in range(5000):  # more keys than one small index file holds: the child rolls files
        store.append(keyed(n))
    pid = store.index_process.pid
    store.close()
    assert not alive(pid)
    checkpoint = CheckpointFile(tmp_path / "s" / "checkpoint").load()
    assert checkpoint.index_flushed == checkpoint.commit_log_flushed > 0
    again = open_store(tmp_path / "s", index_process=False)
    assert again.recovery.clean and again.recovery.records_scanned == 0
    assert found_keys(again, "key-4999") == {"key-4999"} and found_keys(again, "key-0") == {"key-0"}


def test_a_killed_index_process_is_started_again_and_misses_nothing(open_store, caplog):
    store = open_store(index_process=True)
    for n in range(300):
        store.append(keyed(n))
    store.wait_dispatched(timeout=10)
    first = store.index_process.pid
    os.kill(first, signal.SIGKILL)
    for n in range(300, 600):
        store.append(keyed(n))
    store.wait_dispatched(timeout=10)
    assert found_keys(store, "key-599") == {"key-599"} and found_keys(store, "key-150") == {"key-150"}
    assert store.index_process.restarts == 1 and store.index_process.pid != first
    assert any("exited" in record.getMessage() for record in caplog.records)


def test_a_query_not_answered_in_time_fails_and_its_late_answer_is_not_taken_for_the_next(open_store, monkeypatch):
    monkeypatch.setattr(index_process, "QUERY_TIMEOUT_S", 0.5)
    store = open_store(index_process=True)
    for n in range(100):
        store.append(keyed(n))
    store.wait_dispatched(timeout=10)
    child = store.index_process.pid
    os.kill(child, signal.SIGSTOP)
    try:
        with pytest.raises(IndexProcessError, match=r"did not answer 'query' within 0 s .* try again"):
            store.query_messages("orders", "key-1")
    finally:
        os.kill(child, signal.SIGCONT)
    # The answer about key-1 arrives late: taken for this query's, it would find no message with key-2.
    assert found_keys(store, "key-2") == {"key-2"}
    assert store.index_process.pid == child and store.index_process.restarts == 0


def test_retention_deletes_old_index_files_through_the_index_process(open_store):
    store = open_store(index_process=True)
    for n in range(6000):  # two index entries a message: several files of 4096 entries
        store.append(keyed(n))
    store.wait_dispatched(timeout=10)
    assert found_keys(store, "key-0") == {"key-0"}
    deleted = store.index_process.delete_below(store.commit_log.write_pos)
    assert deleted >= 2  # every file but the last
    assert found_keys(store, "key-0") == set() and found_keys(store, "key-5999") == {"key-5999"}


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from core.store.config import FlushMode, StoreConfig
    from core.store.message import Message
    from core.store.message_store import MessageStore

    directory, small = Path(sys.argv[1]), eval(sys.argv[2])
    store = MessageStore(StoreConfig(directory, flush_mode=FlushMode.SYNC_FLUSH, index_process=True, **small))
    store.open()
    print("pid", store.index_process.pid, flush=True)
    n = 0
    while True:
        message = Message("orders", b"x" * 100, n % 2, {"KEYS": f"key-{n}", "UNIQ_KEY": f"id-{n}"})
        store.put_blocking(message)
        print(n, flush=True)  # acknowledged: on disk under SYNC_FLUSH
        n += 1
    """
)


def test_every_acknowledged_message_is_found_after_the_store_process_is_killed(open_store, tmp_path):
    directory = tmp_path / "crashed"
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(directory), repr(SMALL)],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert writer.stdout is not None
    child = int(writer.stdout.readline().split()[1])
    acked = -1
    deadline = time.monotonic() + 30
    while acked < 3000 and time.monotonic() < deadline:  # past a few checkpoints of the index
        acked = int(writer.stdout.readline())
    writer.send_signal(signal.SIGKILL)
    writer.wait()
    acked = max([acked, *(int(line) for line in writer.stdout.read().split())])
    store = open_store(directory, index_process=True)  # waits for the orphaned index process to go
    assert not alive(child)
    assert not store.recovery.clean
    missing = [
        n for n in range(acked + 1) if [m.unique_id for m in store.query_messages("orders", f"id-{n}")] != [f"id-{n}"]
    ]
    assert missing == []


def children_running(module: str) -> list[int]:
    """Pids of this process's children whose command line names `module`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text().splitlines()
            ppid = int(next(line for line in status if line.startswith("PPid:")).split()[1])
            cmdline = (entry / "cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError, StopIteration):
            continue
        if ppid == os.getpid() and module.encode() in cmdline:
            found.append(int(entry.name))
    return found


def test_the_index_lock_is_held_from_the_moment_the_child_exists(open_store, tmp_path):
    # A store process killed while its index child was still starting left that child running unlocked: the next
    # open took the lock at once, and the old child then opened (and created) index files beside the recovery.
    directory = tmp_path / "store"
    opener = threading.Thread(target=open_store, args=(directory,), kwargs={"index_process": True})
    opener.start()
    try:
        deadline = time.monotonic() + 30
        while not children_running("core.store.index.child"):
            assert time.monotonic() < deadline, "no index process appeared"
            time.sleep(0.001)
        fd = os.open(directory / "index" / index_process.LOCK_NAME, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    finally:
        opener.join()
