"""ProcessQueue's flow control: a pull loop over the queue's limits waits for room, and gets it once consumption
brings the queue under both limits, not before."""

import asyncio

from core.client.process_queue import ProcessQueue
from core.store.message import StoredMessage


def stored(offset: int, size: int) -> StoredMessage:
    return StoredMessage("t", b"x" * size, 0, offset, offset * 100, 0, 0, 0, 0, 0, ("::1", 0), 0, ("::1", 0), 0, 0, {})


async def test_room_comes_once_the_count_is_under_its_limit():
    pq = ProcessQueue()
    messages = [stored(offset, 10) for offset in range(3)]
    pq.put(messages)
    assert pq.full(3, 1_000)
    room = pq.room(3, 1_000)
    assert not room.done()
    pq.remove(messages[:1])
    assert room.done() and not pq.full(3, 1_000)


async def test_room_waits_for_the_bytes_too():
    pq = ProcessQueue()
    small, large = stored(0, 5), stored(1, 30)
    pq.put([small, large])
    room = pq.room(10, 30)  # 2 messages of 10 allowed, but 35 bytes of 30
    pq.remove([small])
    assert not room.done()  # 30 bytes held: still at the limit
    pq.remove([large])
    assert room.done()


async def test_room_is_there_at_once_when_the_queue_is_under_its_limits():
    pq = ProcessQueue()
    pq.put([stored(0, 10)])
    assert pq.room(2, 100).done()


async def test_a_new_wait_replaces_the_old_one():
    pq = ProcessQueue()
    messages = [stored(offset, 1) for offset in range(4)]
    pq.put(messages)
    first = pq.room(2, 100)
    second = pq.room(4, 100)
    assert first.cancelled()
    pq.remove(messages[:1])  # 3 left: under 4, not under 2
    assert second.done()


async def test_a_waiting_pull_loop_is_cancelled_cleanly():
    pq = ProcessQueue()
    pq.put([stored(0, 1)])

    async def paused() -> None:
        await pq.room(1, 100)

    task = asyncio.get_running_loop().create_task(paused())
    await asyncio.sleep(0)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
    pq.remove([stored(0, 1)])  # the cancelled future is not answered again
