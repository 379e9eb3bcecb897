"""A sink runner's queues on the other broker groups of a cluster (an EventBridge target reads its delivery queue on
every group), read over remoting with the remote client's pull consumer, as the sink's own consumer group: the
offsets are committed on each queue's group, so the runner that takes the work over on another node goes on from
them (at least once: what was delivered since the last write, every PERSIST_INTERVAL_S and at stop, is delivered
again).

A group that does not answer (its node is down, its master being elected) is passed over, and read again from where
it was when it answers: its messages wait in its store. Arrivals on other groups are heard through one long poll per
queue (`watch`), answered by the group as a message arrives, which wakes the runner.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Protocol

from core import ConsumeFromWhere, MessageQueue, PullResult, PullStatus
from remote_client import Cluster, PullConsumer

log = logging.getLogger(__name__)


class _Settable(Protocol):
    def set(self) -> None: ...


# How long a group holds a watching pull when nothing arrives (a broker holds one at most 15 s).
WATCH_LONG_POLL_MS = 14_000
# After a failed watch (the group is down), the next one waits this long.
WATCH_RETRY_S = 2.0
# After a watch heard an arrival, how long it waits for the runner to read it before it watches again anyway.
WATCH_READ_WAIT_S = 2.0


class RemoteReader:
    def __init__(self, cluster: Cluster, group: str) -> None:
        self.cluster = cluster
        self.group = group
        # FIRST_OFFSET: a queue its group never committed an offset in is read from its first message, as the
        # runner reads its own group's.
        self.consumer = PullConsumer(cluster, group, consume_from=ConsumeFromWhere.FIRST_OFFSET)
        self._watches: list[asyncio.Task[None]] = []
        self.read = asyncio.Event()  # set by the runner after each read: a watch that heard an arrival waits for it

    async def start(self) -> None:
        await self.consumer.start()

    async def close(self) -> None:
        """Stop watching and write the offsets committed (a group that does not answer keeps its older ones)."""
        for task in self._watches:
            task.cancel()
        for task in self._watches:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._watches.clear()
        with contextlib.suppress(Exception):
            await self.consumer.shutdown()

    async def start_offset(self, queue: MessageQueue) -> int:
        """The group's committed offset in `queue`, else the queue's first message; raises when it does not
        answer."""
        return await self.consumer.start_offset(queue)

    async def pull(self, queue: MessageQueue, offset: int, max_count: int) -> PullResult:
        return await self.consumer.pull(queue, offset, max_count)

    def commit(self, queue: MessageQueue, offset: int) -> None:
        self.consumer.commit(queue, offset)

    def watch(self, queue: MessageQueue, offset_of: Callable[[MessageQueue], int | None], arrived: _Settable) -> None:
        """Set `arrived` whenever `queue` holds a message at or past the runner's offset in it (`offset_of`, asked
        at each watch; None while it is not known)."""
        self._watches.append(asyncio.get_running_loop().create_task(self._watch(queue, offset_of, arrived)))

    async def _watch(
        self, queue: MessageQueue, offset_of: Callable[[MessageQueue], int | None], arrived: _Settable
    ) -> None:
        while True:
            offset = offset_of(queue)
            if offset is None:  # the group has not answered where to start: the runner asks again when woken
                await asyncio.sleep(WATCH_RETRY_S)
                arrived.set()
                continue
            try:
                got = await self.consumer.pull(queue, offset, 1, long_poll_ms=WATCH_LONG_POLL_MS)
            except Exception as exc:  # the group is down or electing: its messages wait
                log.debug("%s: watch of %s failed: %s", self.group, queue, exc)
                await asyncio.sleep(WATCH_RETRY_S)
                continue
            if got.status is PullStatus.FOUND or (
                got.status is PullStatus.OFFSET_ILLEGAL and got.next_begin_offset != offset
            ):
                self.read.clear()
                arrived.set()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.read.wait(), WATCH_READ_WAIT_S)
