import asyncio
import threading
import time

import pytest

from core.store.config import FlushMode, StoreConfig
from core.store.errors import InvalidMessageError, InvalidTopicError, MessageTooLargeError, StoreLockedError
from core.store.log.flush_service import FlushWaiters
from core.store.message import Message, tags_code
from core.store.message_id import UniqueIdGenerator, decode_offset_msg_id
from core.store.message_store import GetStatus, MessageStore, PutStatus

from .conftest import small_config


def msg(topic="orders", body=b"payload", queue_id=0, **props):
    return Message(topic=topic, body=body, queue_id=queue_id, properties=dict(props), born_timestamp=123)


def test_append_then_read_back(open_store):
    store = open_store()
    results = [store.append(msg(body=f"m{n}".encode(), queue_id=n % 2, TAGS="a" if n % 3 else "b")) for n in range(10)]
    assert [r.queue_offset for r in results] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert results[1].commit_log_offset == results[0].end_offset
    assert store.wait_dispatched()
    got = store.get_messages("orders", 1, 0, max_count=100)
    assert got.status is GetStatus.FOUND
    assert [m.body for m in got.messages] == [b"m1", b"m3", b"m5", b"m7", b"m9"]
    assert got.next_begin_offset == 5
    assert (got.min_offset, got.max_offset) == (0, 5)
    first = got.messages[0]
    assert first.queue_offset == 0 and first.born_timestamp == 123 and first.tags == "a"
    assert first.commit_log_offset == results[1].commit_log_offset


def test_get_statuses(open_store):
    store = open_store()
    assert store.get_messages("orders", 0, 0).status is GetStatus.NO_MATCHED_LOGIC_QUEUE
    for _ in range(3):
        store.append(msg())
    store.wait_dispatched()
    assert store.get_messages("orders", 0, 3).status is GetStatus.OFFSET_OVERFLOW_ONE
    badly = store.get_messages("orders", 0, 9)
    assert badly.status is GetStatus.OFFSET_OVERFLOW_BADLY and badly.next_begin_offset == 3
    some = store.get_messages("orders", 0, 1, max_count=1)
    assert len(some.messages) == 1 and some.next_begin_offset == 2


def test_tag_and_message_filters(open_store):
    store = open_store()
    for n in range(30):
        store.append(msg(body=str(n).encode(), TAGS=["red", "green", "blue"][n % 3]))
    store.wait_dispatched()
    wanted = {tags_code("red"), tags_code("blue")}
    got = store.get_messages("orders", 0, 0, max_count=100, tag_filter=wanted.__contains__)
    assert [int(m.body) for m in got.messages] == [n for n in range(30) if n % 3 != 1]
    none = store.get_messages("orders", 0, 0, tag_filter=lambda code: False)
    assert none.status is GetStatus.NO_MATCHED_MESSAGE and none.next_begin_offset == 30
    odd = store.get_messages("orders", 0, 0, max_count=5, message_filter=lambda m: int(m.body) % 2 == 1)
    assert [int(m.body) for m in odd.messages] == [1, 3, 5, 7, 9]
    assert odd.next_begin_offset == 10


def test_bad_input_is_refused_and_nothing_is_written(open_store):
    store = open_store()
    before = store.commit_log.write_pos
    with pytest.raises(InvalidTopicError, match="'/' is not allowed"):
        store.append(msg(topic="a/b"))
    with pytest.raises(InvalidTopicError):
        store.append(msg(topic="../../etc"))
    with pytest.raises(MessageTooLargeError, match="max_message_size"):
        store.append(msg(body=b"x" * 300_000))
    with pytest.raises(InvalidMessageError, match="separators"):
        store.append(msg(KEYS="a\x02b"))
    with pytest.raises(InvalidMessageError, match="body must be bytes"):
        store.append(Message(topic="t", body="text"))  # type: ignore[arg-type]
    with pytest.raises(InvalidMessageError, match="queue id must be an integer, not str"):
        store.append(Message(topic="t", body=b"x", queue_id="1"))  # type: ignore[arg-type]
    with pytest.raises(InvalidMessageError, match="queue id must be an integer, not float"):
        store.append_batch([msg(), Message(topic="t", body=b"x", queue_id=1.0)])  # type: ignore[arg-type]
    assert store.commit_log.write_pos == before
    assert store.append(msg()).status is PutStatus.PUT_OK


def test_segments_roll_with_a_filler(open_store):
    store = open_store()
    bodies = [bytes([n % 256]) * (30_000 + n) for n in range(100)]  # about 3 MB over 1 MiB segments
    results = [store.append(msg(body=b)) for b in bodies]
    store.wait_dispatched()
    assert len(store.commit_log.files.files) >= 3
    crossing = [r for r in results if r.commit_log_offset % (1024 * 1024) == 0 and r.commit_log_offset]
    assert crossing, "some record must start a new segment"
    got = store.get_messages("orders", 0, 0, max_count=200, max_bytes=10**9)
    assert [m.body for m in got.messages] == bodies


def test_append_batch_writes_what_appends_one_by_one_write(open_store, tmp_path):
    """A batch crossing segments, with light queues and mixed queues, gives the same records, offsets and
    consume-queue entries as the same messages appended one at a time."""
    bodies = [bytes([n % 256]) * (20_000 + 37 * n) for n in range(120)]  # about 2.7 MB over 1 MiB segments

    def messages():
        return [
            msg(body=b, queue_id=n % 3, UNIQ_KEY=f"id{n}", INNER_MULTI_DISPATCH="%LMQ%a,%LMQ%b" if n % 2 else "%LMQ%a")
            for n, b in enumerate(bodies)
        ]

    one = open_store(tmp_path / "one")
    singles = [one.append(m) for m in messages()]
    batched = open_store(tmp_path / "batched")
    results = batched.append_batch(messages()[:50]) + batched.append_batch(messages()[50:])
    one.wait_dispatched()
    batched.wait_dispatched()
    assert len(batched.commit_log.files.files) >= 3
    assert [(r.commit_log_offset, r.queue_id, r.queue_offset, r.size) for r in results] == [
        (r.commit_log_offset, r.queue_id, r.queue_offset, r.size) for r in singles
    ]
    for store in (one, batched):
        for queue_id in range(3):
            got = store.get_messages("orders", queue_id, 0, max_count=200, max_bytes=10**9)
            assert [m.body for m in got.messages] == bodies[queue_id::3]
        light_b = store.get_messages("%LMQ%b", 0, 0, max_count=200, max_bytes=10**9)
        assert [m.body for m in light_b.messages] == bodies[1::2]
        assert [m.queue_offset for m in light_b.messages] == list(range(60))
        assert store.get_messages("%LMQ%a", 0, 0, max_count=200, max_bytes=10**9).next_begin_offset == 120
    found = batched.find_by_unique_id("orders", "id77")
    assert found is not None and found.body == bodies[77]


def test_append_batch_with_a_bad_message_writes_nothing(open_store):
    store = open_store()
    before = store.commit_log.write_pos
    with pytest.raises(InvalidMessageError, match="separators"):
        store.append_batch([msg(body=b"a"), msg(body=b"b", KEYS="a\x02b"), msg(body=b"c")])
    with pytest.raises(MessageTooLargeError):
        store.append_batch([msg(body=b"a"), msg(body=b"x" * 300_000)])
    assert store.commit_log.write_pos == before
    assert [r.queue_offset for r in store.append_batch([msg(body=b"a"), msg(body=b"b")])] == [0, 1]


def test_restart_after_clean_close_reads_no_log(open_store, tmp_path):
    store = open_store()
    generator = UniqueIdGenerator()
    ids = [
        store.append(msg(body=f"{n}".encode(), queue_id=n % 4, UNIQ_KEY=generator.next_id())).queue_offset
        for n in range(400)
    ]
    assert max(ids) == 99
    store.close()
    again = open_store()
    assert again.recovery is not None and again.recovery.clean and again.recovery.records_scanned == 0
    assert [again.max_offset("orders", q) for q in range(4)] == [100, 100, 100, 100]
    assert again.append(msg(queue_id=2)).queue_offset == 100
    again.wait_dispatched()
    assert again.get_messages("orders", 3, 99).messages[0].body == b"399"


def test_second_process_cannot_open_the_same_store(open_store, tmp_path):
    open_store()
    other = MessageStore(small_config(tmp_path / "store"))
    with pytest.raises(StoreLockedError, match="another process"):
        other.open()


def test_query_by_key_and_unique_id_and_offset_id(open_store):
    store = open_store()
    generator = UniqueIdGenerator()
    uniq = {}
    for n in range(200):
        unique_id = generator.next_id()
        result = store.append(msg(body=f"{n}".encode(), KEYS=f"order-{n % 20} shop-{n % 3}", UNIQ_KEY=unique_id))
        uniq[n] = (unique_id, result.offset_msg_id)
    store.append(msg(topic="other", KEYS="order-1"))
    store.wait_dispatched()
    found = store.query_messages("orders", "order-7", max_num=100)
    assert sorted(int(m.body) for m in found) == [n for n in range(200) if n % 20 == 7]
    assert [m.store_timestamp for m in found] == sorted((m.store_timestamp for m in found), reverse=True)
    assert len(store.query_messages("orders", "shop-2", max_num=5)) == 5
    assert store.query_messages("orders", "nope") == []
    unique_id, offset_id = uniq[123]
    assert store.find_by_unique_id("orders", unique_id).body == b"123"
    by_offset_id = store.read_message(decode_offset_msg_id(offset_id)[1])
    assert by_offset_id.body == b"123" and by_offset_id.offset_msg_id == offset_id


async def test_sync_flush_acknowledges_after_fsync(open_store):
    store = open_store(flush_mode=FlushMode.SYNC_FLUSH)
    results = await asyncio.gather(*(store.put(msg(body=bytes([n]))) for n in range(64)))
    assert all(r.status is PutStatus.PUT_OK for r in results)
    assert store.commit_log.flushed_pos >= max(r.end_offset for r in results)
    # Group commit: far fewer fsyncs than writers.
    assert store.flush_service.flushes < 64
    batch = await store.put_batch([msg(body=b"a"), msg(body=b"b")])
    assert store.commit_log.flushed_pos >= batch[-1].end_offset


async def test_no_sync_flush_writer_is_answered_before_its_record_is_flushed(open_store):
    # Writers in bursts share futures (one group between two flush starts): each must still hear PUT_OK only once
    # the flushed position has passed its own record.
    store = open_store(flush_mode=FlushMode.SYNC_FLUSH)
    early: list[tuple[int, int]] = []

    async def writer(k: int) -> None:
        for n in range(20):
            result = await store.put(msg(body=f"{k}-{n}".encode() * (1 + n % 7)))
            assert result.status is PutStatus.PUT_OK
            flushed = store.commit_log.flushed_pos
            if flushed < result.end_offset:
                early.append((result.end_offset, flushed))
            if n % 5 == 0:
                await asyncio.sleep(0)

    await asyncio.gather(*(writer(k) for k in range(32)))
    assert early == []
    assert store.flush_service.flushes < 32 * 20


def test_sync_flush_from_threads(open_store):
    store = open_store(flush_mode=FlushMode.SYNC_FLUSH)
    results = []

    def writer(k):
        for n in range(20):
            results.append(store.put_blocking(msg(body=f"{k}-{n}".encode(), queue_id=k % 2)))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 160 and all(r.status is PutStatus.PUT_OK for r in results)
    assert sorted(r.queue_offset for r in results if r.queue_id == 0) == list(range(80))


async def test_flush_waiter_times_out_when_the_disk_does_not_answer():
    # As the store drives them: a writer registers after its append, the flush thread starts a flush (which then
    # reads how far the log is written), another writer appends and registers, and the flush covers the first.
    waiters = FlushWaiters(timeout_s=0.2)
    early = waiters.add_async(10)
    waiters.flush_starting()
    late = waiters.add_async(1000)
    waiters.release(500)
    assert await asyncio.wait_for(early, 1) is True
    started = time.monotonic()
    assert await asyncio.wait_for(late, 2) is False  # no flush reaches it: FLUSH_DISK_TIMEOUT
    assert time.monotonic() - started >= 0.1


async def test_writers_between_two_flush_starts_share_a_future_released_only_past_the_highest():
    waiters = FlushWaiters(timeout_s=5)
    first, second = waiters.add_async(100), waiters.add_async(300)
    assert first is second  # one group: one future for the burst
    waiters.flush_starting()
    third = waiters.add_async(400)
    assert third is not first
    waiters.release(200)  # an earlier flush's position: below the group's highest offset
    await asyncio.sleep(0.01)
    assert not first.done() and not third.done()
    waiters.release(300)
    assert await asyncio.wait_for(first, 1) is True
    await asyncio.sleep(0.01)
    assert not third.done()
    waiters.release(400)
    assert await asyncio.wait_for(third, 1) is True
    assert waiters.add_async(350).result() is True  # already on disk: done at once


def test_dispatch_listener_sees_new_messages(open_store):
    store = open_store()
    seen = []
    event = threading.Event()

    def listener(touched):
        seen.append(touched)
        event.set()

    store.add_dispatch_listener(listener)
    store.append(msg(queue_id=3))
    assert event.wait(5)
    assert ("orders", 3) in set().union(*seen)


def test_offset_by_time(open_store):
    store = open_store()
    for _ in range(5):
        store.append(msg(body=b"early"))
    store.wait_dispatched()
    time.sleep(0.02)
    cut = int(time.time() * 1000)
    time.sleep(0.02)
    for _ in range(3):
        store.append(msg(body=b"late"))
    store.wait_dispatched()
    assert store.offset_by_time("orders", 0, cut) == 5
    assert store.offset_by_time("orders", 0, 0) == 0
    assert store.offset_by_time("orders", 0, cut + 10**7) == 8


def test_async_flush_flushes_once_flush_after_bytes_wait_not_only_every_interval(open_store, tmp_path):
    # The interval alone would flush nothing for a minute; 64 KiB waiting must be enough.
    store = open_store(tmp_path / "eager", flush_interval_ms=60_000, flush_after_bytes=64 * 1024)
    lazy = open_store(tmp_path / "lazy", flush_interval_ms=60_000, flush_after_bytes=0)
    for target in (store, lazy):
        for n in range(100):
            target.append(Message(topic="t", body=bytes([n]) * 2000))
        assert target.wait_dispatched(timeout=10)
    deadline = time.monotonic() + 10
    while store.commit_log.flushed_pos < 64 * 1024 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert store.commit_log.flushed_pos >= 64 * 1024
    assert store.flush_service.flushes >= 1
    assert lazy.commit_log.flushed_pos == 0 and lazy.flush_service.flushes == 0


def test_flush_after_bytes_must_not_be_negative(tmp_path):
    with pytest.raises(ValueError, match="flush_after_bytes -1: must be 0"):
        StoreConfig(store_dir=tmp_path, flush_after_bytes=-1)
