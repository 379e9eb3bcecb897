"""What core tests read back from a broker: every message of a topic, and waiting for the system under test."""

import asyncio

from core import PullStatus


async def everything_in(broker, topic, group="audit"):
    """Every message stored in `topic`, all queues in order, once the dispatcher has caught up."""
    await broker.wait_visible()
    found = []
    for queue in range(broker.topic_config(topic).read_queue_nums):
        offset = 0
        while True:
            got = await broker.pull(group, topic, queue, offset, max_count=256)
            if got.status is not PullStatus.FOUND:
                break
            found += got.messages
            offset = got.next_begin_offset
    return found


async def eventually(condition, timeout=20.0):
    """Wait until `condition()` holds (the bound only stops a hung test; it is not a speed check)."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.01)


async def until(condition, what: str, timeout_s: float = 20.0) -> None:
    """Let the broker's tasks (and a checker's worker thread) run until `condition()` holds; fail naming `what`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


async def settle(broker) -> None:
    """Give the broker's loops and what they started time to run to the end, then wait for the dispatcher."""
    for _ in range(20):
        await asyncio.sleep(0.005)
    await broker.wait_visible()
