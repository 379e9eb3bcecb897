"""The messages of one queue that a push consumer pulled but has not finished (RocketMQ's ProcessQueue).

It bounds memory (the pull loop pauses when the count or size passes its threshold, until consumption makes room)
and decides what may be committed: the lowest offset still in flight, so a crash redelivers instead of losing.
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
        # Flow control: the future a paused pull loop waits on, answered once the queue is under both limits.
        self._room: asyncio.Future[None] | None = None
        self._room_count = 0
        self._room_bytes = 0

    def put(self, messages: list[StoredMessage]) -> None:
        for message in messages:
            if message.queue_offset not in self.messages:
                self.messages[message.queue_offset] = message
                self.cached_bytes += len(message.body)
            self.max_pulled = max(self.max_pulled, message.queue_offset)
        self.arrived.set()

    def remove(self, messages: list[StoredMessage]) -> None:
        """Forget consumed messages (`commit_offset` then says what may be committed: asked once per pull's
        messages, not per message, since it passes over the slots the removed messages leave at the start)."""
        for message in messages:
            if self.messages.pop(message.queue_offset, None) is not None:
                self.cached_bytes -= len(message.body)
            self.consuming.discard(message.queue_offset)
        room = self._room
        if room is not None and len(self.messages) < self._room_count and self.cached_bytes < self._room_bytes:
            self._room = None
            if not room.done():
                room.set_result(None)

    def full(self, max_count: int, max_bytes: int) -> bool:
        """True while the queue holds `max_count` messages or `max_bytes` bytes of bodies: pulling must pause."""
        return len(self.messages) >= max_count or self.cached_bytes >= max_bytes

    def room(self, max_count: int, max_bytes: int) -> asyncio.Future[None]:
        """A future answered once consumption brings the queue under `max_count` messages and `max_bytes` (done
        at once if it is). One waiter, the queue's pull loop."""
        room: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if not self.full(max_count, max_bytes):
            room.set_result(None)
            return room
        if self._room is not None and not self._room.done():
            self._room.cancel()
        self._room = room
        self._room_count = max_count
        self._room_bytes = max_bytes
        return room

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
