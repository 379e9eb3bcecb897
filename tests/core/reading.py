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
