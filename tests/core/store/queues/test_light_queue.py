"""Light message queues: one record, a consume-queue entry in each light queue it names, rebuilt after a crash."""

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from core.store.errors import InvalidMessageError
from core.store.message import PROPERTY_MULTI_DISPATCH, Message
from core.store.message_store import GetStatus
from tests.core.store.conftest import SMALL

ROOT = Path(__file__).resolve().parents[4]


def fan(n: int, *queues: str) -> Message:
    return Message(topic="sensors", body=b"m%d" % n, properties={PROPERTY_MULTI_DISPATCH: ",".join(queues)})


def light_bodies(store, name):
    got = store.get_messages(name, 0, store.min_offset(name, 0), max_count=10_000)
    assert not got.corrupt
    return [m.body for m in got.messages]


def test_one_record_many_queue_entries(open_store):
    store = open_store()
    before = store.commit_log.write_pos
    first = store.append(fan(0, "%LMQ%a", "%LMQ%b"))
    assert store.commit_log.write_pos - before == first.size  # the body is stored once
    store.append(fan(1, "%LMQ%b"))
    store.append(fan(2, "%LMQ%a", "%LMQ%a"))  # named twice, one entry
    assert store.wait_dispatched()
    assert light_bodies(store, "%LMQ%a") == [b"m0", b"m2"]
    assert light_bodies(store, "%LMQ%b") == [b"m0", b"m1"]
    assert store.max_offset("sensors", 0) == 3
    a = store.get_messages("%LMQ%a", 0, 0).messages[0]
    b = store.get_messages("%LMQ%b", 0, 0).messages[0]
    assert a.commit_log_offset == b.commit_log_offset == first.commit_log_offset
    assert a.topic == "sensors" and a.light_queues == ["%LMQ%a", "%LMQ%b"]
    # Read through a light queue, a message carries its offset in that queue.
    assert [m.queue_offset for m in store.get_messages("%LMQ%b", 0, 0).messages] == [0, 1]


def test_light_queue_files_are_small(open_store):
    store = open_store(light_cq_entries_per_file=50)
    for n in range(120):
        store.append(fan(n, "%LMQ%small"))
    assert store.wait_dispatched()
    files = sorted((store.config.consume_queue_dir / "%LMQ%small" / "0").iterdir())
    assert [f.stat().st_size for f in files] == [50 * 20] * 3
    assert light_bodies(store, "%LMQ%small") == [b"m%d" % n for n in range(120)]


def test_a_name_without_the_prefix_is_refused_and_nothing_is_written(open_store):
    store = open_store()
    before = store.commit_log.write_pos
    with pytest.raises(InvalidMessageError, match="not a light queue name"):
        store.append(fan(0, "%LMQ%ok", "plain"))
    with pytest.raises(Exception, match="topic"):
        store.append(fan(0, "%LMQ%bad/name"))
    assert store.commit_log.write_pos == before


def test_the_name_of_a_topic_already_written_is_no_light_queue_either(open_store):
    store = open_store()
    store.append(Message(topic="orders", body=b"an order"))
    before = store.commit_log.write_pos
    with pytest.raises(InvalidMessageError, match="'orders' is not a light queue name"):
        store.append(fan(0, "orders"))
    assert store.commit_log.write_pos == before


def test_an_entry_of_a_queue_the_record_does_not_name_is_reported(open_store):
    store = open_store()
    store.append(fan(0, "%LMQ%a"))
    store.append(Message(topic="sensors", body=b"plain"))
    assert store.wait_dispatched()
    queue = store.queues.get_or_create("%LMQ%a", 0)
    plain = store.get_messages("sensors", 0, 1).messages[0]
    queue.put(1, plain.commit_log_offset, plain.store_size, 0)  # an entry pointing at a record not for it
    got = store.get_messages("%LMQ%a", 0, 0, max_count=10)
    assert [m.body for m in got.messages] == [b"m0"]
    assert len(got.corrupt) == 1 and got.corrupt[0][0] == 1


def test_clean_restart_keeps_entries_and_offsets(open_store, tmp_path):
    directory = tmp_path / "store"
    store = open_store(directory)
    for n in range(10):
        store.append(fan(n, "%LMQ%a", "%LMQ%b") if n % 2 else fan(n, "%LMQ%a"))
    store.close()
    store = open_store(directory)
    assert store.recovery.clean
    assert store.append(fan(10, "%LMQ%b")).queue_offset == 11 - 1
    assert store.wait_dispatched()
    assert light_bodies(store, "%LMQ%a") == [b"m%d" % n for n in range(10)]
    assert light_bodies(store, "%LMQ%b") == [b"m1", b"m3", b"m5", b"m7", b"m9", b"m10"]


def test_sigkill_rebuilds_light_queues_in_log_order(open_store, tmp_path):
    directory = tmp_path / "store"
    code = textwrap.dedent(f"""
        import asyncio, os, signal
        from core.store.config import FlushMode, StoreConfig
        from core.store.message import Message
        from core.store.message_store import MessageStore
        def opened():
            store = MessageStore(StoreConfig(store_dir={str(directory)!r}, flush_mode=FlushMode.SYNC_FLUSH,
                                             **{SMALL!r}))
            store.open()
            return store
        async def main():
            store = opened()
            for n in range(400):
                names = ["%LMQ%all"] + (["%LMQ%odd"] if n % 2 else []) + (["%LMQ%five"] if n % 5 == 0 else [])
                await store.put(Message(topic="sensors", body=b"m%d" % n, queue_id=n % 3,
                                        properties={{"{PROPERTY_MULTI_DISPATCH}": ",".join(names)}}))
                if n == 200:
                    store.close()  # a clean checkpoint in the middle: recovery starts from it
                    store = opened()
        asyncio.run(main())
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == -signal.SIGKILL, result.stderr
    store = open_store(directory)
    assert store.recovery.clean is False
    assert light_bodies(store, "%LMQ%all") == [b"m%d" % n for n in range(400)]
    assert light_bodies(store, "%LMQ%odd") == [b"m%d" % n for n in range(1, 400, 2)]
    assert light_bodies(store, "%LMQ%five") == [b"m%d" % n for n in range(0, 400, 5)]
    assert store.append(fan(400, "%LMQ%odd", "%LMQ%five")).queue_offset >= 0
    assert store.wait_dispatched()
    assert light_bodies(store, "%LMQ%odd")[-1] == b"m400"
    assert store.max_offset("%LMQ%odd", 0) == 201
    assert store.max_offset("%LMQ%five", 0) == 81
    assert store.get_messages("%LMQ%five", 0, 80).status is GetStatus.FOUND


def test_deleting_a_light_queue_starts_it_over(open_store):
    store = open_store()
    store.append(fan(0, "%LMQ%gone"))
    assert store.wait_dispatched()
    assert store.delete_topic("%LMQ%gone") == 1
    assert store.max_offset("%LMQ%gone", 0) == 0
    store.append(fan(1, "%LMQ%gone"))
    assert store.wait_dispatched()
    assert light_bodies(store, "%LMQ%gone") == [b"m1"]
    assert os.path.isdir(store.config.consume_queue_dir / "%LMQ%gone")


def test_a_queue_with_a_few_new_entries_waits_for_the_thorough_flush_and_the_checkpoint_says_so(open_store):
    # Thousands of light queues with an entry or two each would cost an fdatasync apiece every second: a queue
    # with fewer than logic_flush_least_pages unflushed pages waits, and the checkpoint vouches only for what the
    # last flush of every queue wrote (recovery re-dispatches from there).
    store = open_store(logic_flush_thorough_interval_ms=3_600_000)
    store.append(fan(0, "%LMQ%a"))
    assert store.wait_dispatched()
    first = store._save_checkpoint()  # the first is thorough
    (queue,) = [q for q in store.queues.all() if q.topic == "%LMQ%a"]
    assert queue.flushed_offset == queue.max_offset == 1
    assert first.dispatched == store.dispatcher.dispatched_offset

    store.append(fan(1, "%LMQ%a"))
    assert store.wait_dispatched()
    second = store._save_checkpoint()
    assert (queue.flushed_offset, queue.max_offset) == (1, 2)  # one entry: not worth an fdatasync yet
    assert second.dispatched == first.dispatched < store.dispatcher.dispatched_offset
    assert second.index_flushed == store.dispatcher.dispatched_offset  # the index is flushed every time

    for n in range(2, 2 + 2 * 4096 // 20):  # two pages of entries: flushed without waiting
        store.append(fan(n, "%LMQ%a"))
    assert store.wait_dispatched()
    store._save_checkpoint()
    assert queue.flushed_offset == queue.max_offset
