"""Long polling (RocketMQ's PullRequestHoldService): pulls that found nothing wait for the next message.

The store's dispatcher thread reports which queues got messages; `notify_threadsafe` hands that to the event
loop in one call per dispatch round, and every pull waiting on one of those queues wakes up and reads again.
A pull that waits longer than its timeout returns empty. Nothing here polls.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable

QueueKey = tuple[str, int]


class LongPollWaiters:
    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._waiting: dict[QueueKey, list[asyncio.Future[None]]] = {}

    async def wait(self, topic: str, queue_id: int, timeout_s: float, ready: Callable[[], bool]) -> bool:
        """Wait until a message arrives in the queue (True) or the timeout passes (False).

        `ready()` is checked after the waiter is registered: a message dispatched between the caller's empty
        read and the registration would otherwise go unnoticed until the timeout.
        """
        future: asyncio.Future[None] = self.loop.create_future()
        key = (topic, queue_id)
        self._waiting.setdefault(key, []).append(future)
        try:
            if ready():
                return True
            # asyncio.timeout, not wait_for: in 3.11 wait_for swallows a cancellation that arrives together with
            # the wake-up, and a consumer being shut down would pull on forever.
            async with asyncio.timeout(timeout_s):
                await future
            return True
        except TimeoutError:
            return False
        finally:
            waiters = self._waiting.get(key)
            if waiters is not None:
                if future in waiters:
                    waiters.remove(future)
                if not waiters:
                    del self._waiting[key]

    def notify(self, queues: Iterable[QueueKey]) -> None:
        """Wake the pulls waiting on `queues` (event-loop thread)."""
        for key in queues:
            for future in self._waiting.pop(key, ()):
                if not future.done():
                    future.set_result(None)

    def notify_threadsafe(self, queues: set[QueueKey]) -> None:
        """The store's dispatch listener: called on the dispatcher thread."""
        if self._waiting:
            with contextlib.suppress(RuntimeError):  # a closed loop has nobody waiting any more
                self.loop.call_soon_threadsafe(self.notify, queues)

    def wake_all(self) -> None:
        self.notify(list(self._waiting))

    @property
    def waiting(self) -> int:
        return sum(len(waiters) for waiters in self._waiting.values())
