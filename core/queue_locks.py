"""Queue locks for orderly consumption (RocketMQ's RebalanceLockManager).

An orderly consumer consumes a queue only while it holds the queue's lock in the broker, so two members never
consume one queue at once even while a rebalance moves it. Locks expire `lock_expire_s` after the holder's last
renewal (RocketMQ: 60 s, renewed every 20 s), so a dead holder's queues free themselves.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from core.message_queue import MessageQueue

# RocketMQ's rocketmq.broker.rebalance.lockMaxLiveTime.
DEFAULT_LOCK_EXPIRE_S = 60.0


class QueueLocks:
    def __init__(self, lock_expire_s: float = DEFAULT_LOCK_EXPIRE_S, clock: Callable[[], float] = time.monotonic):
        self.lock_expire_s = lock_expire_s
        self.clock = clock
        self._locks: dict[tuple[str, MessageQueue], tuple[str, float]] = {}

    def lock(self, group: str, client_id: str, queues: Iterable[MessageQueue]) -> set[MessageQueue]:
        """Lock (or renew) what is free or already ours; return the queues `client_id` now holds."""
        now = self.clock()
        held = set()
        for queue in queues:
            key = (group, queue)
            current = self._locks.get(key)
            if current is None or current[0] == client_id or now - current[1] > self.lock_expire_s:
                self._locks[key] = (client_id, now)
                held.add(queue)
        return held

    def unlock(self, group: str, client_id: str, queues: Iterable[MessageQueue]) -> None:
        for queue in queues:
            key = (group, queue)
            current = self._locks.get(key)
            if current is not None and current[0] == client_id:
                del self._locks[key]

    def holder(self, group: str, queue: MessageQueue) -> str | None:
        current = self._locks.get((group, queue))
        if current is None or self.clock() - current[1] > self.lock_expire_s:
            return None
        return current[0]
