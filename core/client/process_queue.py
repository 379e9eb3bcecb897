"""The messages of one queue that a push consumer pulled but has not finished (RocketMQ's ProcessQueue).

It bounds memory (the pull loop pauses when the count or size passes its threshold) and decides what may be
committed: the lowest offset still in flight, so a crash redelivers instead of losing.
"""

from __future__ import annotations

import asyncio

from core.store.message import StoredMessage


class ProcessQueue:
    def __init__(self) -> None:
        self.messages: dict[int, StoredMessage] = {}  # by queue offset, in pull order (offset order)
        self.cached_bytes = 0
        self.max_pulled = -1
        self.dropped = False
        self.locked = False  # orderly consumers: the broker's lock on this queue is held
        self.consuming: set[int] = set()  # orderly: offsets handed to the listener right now
        self.arrived = asyncio.Event()

    def put(self, messages: list[StoredMessage]) -> None:
        for message in messages:
            if message.queue_offset not in self.messages:
                self.messages[message.queue_offset] = message
                self.cached_bytes += len(message.body)
            self.max_pulled = max(self.max_pulled, message.queue_offset)
        self.arrived.set()

    def remove(self, messages: list[StoredMessage]) -> int:
        """Forget consumed messages; return the offset that may now be committed."""
        for message in messages:
            if self.messages.pop(message.queue_offset, None) is not None:
                self.cached_bytes -= len(message.body)
            self.consuming.discard(message.queue_offset)
        return self.commit_offset()

    def commit_offset(self) -> int:
        return next(iter(self.messages)) if self.messages else self.max_pulled + 1

    def take_in_order(self, max_count: int) -> list[StoredMessage]:
        """Orderly: the next messages in offset order that are not being consumed already."""
        batch = []
        for offset, message in self.messages.items():
            if offset in self.consuming:
                continue
            batch.append(message)
            if len(batch) >= max_count:
                break
        self.consuming.update(message.queue_offset for message in batch)
        return batch

    @property
    def count(self) -> int:
        return len(self.messages)
