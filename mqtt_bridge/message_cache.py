"""Recent MQTT messages kept decoded, by commit-log offset, so that delivery reads the log once per message.

Every session reads its light queues on its own. Through `Broker.pull` alone, a message that reaches N sessions
is read from the commit log, checked and decoded N times, turned into an `MqttMessage` N times and encoded as
a PUBLISH N times, and one that the gateway has just stored is read back although it was in hand a moment ago.
`MessageCache` keeps the `MqttMessage` of recent commit-log offsets: the gateway adds each message it stores
(with the offset `Broker.send` returned) and each one a pull had to decode, and `pull` serves a queue's
entries from it (`Broker.queue_entries` reads the consume queue only), falling back to `Broker.pull` from the
first entry it does not hold. A commit-log offset names one record for the life of the log, so an entry can
never be stale: the cache only decides how often the log is read, never what is delivered.

Each entry is a `CachedMessage` (wire/protocol_events.py): the message with its QoS 0 PUBLISH encodings, made once
for all its receivers by their connections' protocol objects (`MqttConnection.publish_cached`). Shared subscriptions
read the offsets their group hands out through the same cache (`read`).
"""

from __future__ import annotations

import collections
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from core import Broker, PullStatus
from mqtt_bridge.message_mapping import MqttMessage
from mqtt_bridge.wire.protocol_events import CachedMessage

# Messages kept. The cache only helps a reader that reaches a message before it is evicted, and a reader behind
# by more than the cache holds misses every time (it reads the oldest entries, which go first): a subscriber of
# a QoS 0 fan-in falls tens of thousands of messages behind eight publishers during a burst. So the bound is
# generous, and set by memory: DEFAULT_MAX_BYTES holds about 80,000 messages of 64 bytes.
DEFAULT_CAPACITY = 100_000
# Bytes kept, as counted below, whatever the count: 1 MiB packets would otherwise pin 100 GB.
DEFAULT_MAX_BYTES = 64 * 1024 * 1024
# What an entry costs besides its payload (message object, strings, dictionary slots: about 680 bytes measured
# with tracemalloc for a 64-byte payload), counted so that many tiny messages are bounded by memory too. The
# payload counts twice, once more for the QoS 0 encoding most messages get.
_ENTRY_OVERHEAD = 700


@dataclass(slots=True, init=False)
class Pulled:
    """What `MessageCache.pull` read: (commit-log offset, queue offset, message or None when the core message
    carries no MQTT topic) per entry, in queue order, and where to read next. __init__ written out, as
    CachedMessage's (wire/protocol_events.py)."""

    status: PullStatus
    messages: list[tuple[int, int, CachedMessage | None]]
    next_begin_offset: int

    def __init__(
        self, status: PullStatus, messages: list[tuple[int, int, CachedMessage | None]], next_begin_offset: int
    ) -> None:
        self.status = status
        self.messages = messages
        self.next_begin_offset = next_begin_offset


class MessageCache:
    def __init__(self, broker: Broker, capacity: int = DEFAULT_CAPACITY, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.broker = broker
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self._entries: collections.OrderedDict[int, CachedMessage] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, commit_log_offset: int) -> CachedMessage | None:
        return self._entries.get(commit_log_offset)

    def put(self, commit_log_offset: int, message: MqttMessage, topic: str) -> CachedMessage:
        """Keep the message stored at `commit_log_offset` in core topic `topic` (as `MqttMessage.from_core` reads
        it back)."""
        entries = self._entries
        old = entries.pop(commit_log_offset, None)
        if old is not None:
            self.bytes -= old.size
        cached = CachedMessage(message, 2 * len(message.payload) + _ENTRY_OVERHEAD, topic)
        entries[commit_log_offset] = cached
        self.bytes += cached.size
        self._trim()
        return cached

    def put_many(
        self, offsets: Sequence[int], run: Sequence[tuple[MqttMessage, bytes | None, int | None]], topic: str
    ) -> None:
        """`put` for the messages of one run stored in core topic `topic`, with one trim at the end: `run[i]` is
        (message, its QoS 0 MQTT 3.1.1 PUBLISH without retain flag if known, its packet id, which is not read), as
        the inbound path holds its runs, and `offsets[i]` its commit-log offset. Taking the run as it is spares
        a tuple and an interpreted generator step a message."""
        cache = self._entries
        added = 0
        for commit_log_offset, (message, wire, _) in zip(offsets, run, strict=True):
            old = cache.pop(commit_log_offset, None)
            if old is not None:
                added -= old.size
            cached = cache[commit_log_offset] = CachedMessage(
                message,
                2 * len(message.payload) + _ENTRY_OVERHEAD,
                topic,
                wire or None,
            )
            added += cached.size
        self.bytes += added
        self._trim()

    def _trim(self) -> None:
        entries = self._entries
        while len(entries) > self.capacity or (self.bytes > self.max_bytes and len(entries) > 1):
            _, evicted = entries.popitem(last=False)
            self.bytes -= evicted.size

    async def pull(self, group: str, queue: str, offset: int, max_count: int) -> Pulled:
        """Read up to `max_count` messages of light queue `queue` from `offset`: from the cache while it holds
        them, else through `Broker.pull` (as `group`), keeping what that decodes."""
        entries = self.broker.queue_entries(queue, 0, offset, max_count)
        found: list[tuple[int, int, CachedMessage | None]] = []
        cache = self._entries
        for commit_log_offset, size, _ in entries:
            cached = cache.get(commit_log_offset) if size else None  # size 0: a hole, which `pull` skips
            if cached is None:
                break
            cache.move_to_end(commit_log_offset)
            found.append((commit_log_offset, offset + len(found), cached))
        if found:
            self.hits += len(found)
            return Pulled(PullStatus.FOUND, found, offset + len(found))
        got = await self.broker.pull(group, queue, 0, offset, max_count)
        for stored in got.messages:
            message = MqttMessage.from_core(stored)
            cached = self.put(stored.commit_log_offset, message, stored.topic) if message is not None else None
            found.append((stored.commit_log_offset, stored.queue_offset, cached))
        self.misses += len(found)
        return Pulled(got.status, found, got.next_begin_offset)

    async def read(self, group: str, queue: str, offsets: list[int]) -> dict[int, CachedMessage | None]:
        """The messages at `offsets` of light queue `queue` (ascending), by queue offset, as `pull` reads them (None:
        a core message without an MQTT topic); missing offsets are gone (holes, retention)."""
        return await read_runs(lambda offset, count: self.pull(group, queue, offset, count), offsets)


async def read_runs(
    pull: Callable[[int, int], Awaitable[Pulled]], offsets: list[int]
) -> dict[int, CachedMessage | None]:
    """The messages at `offsets` (ascending) by queue offset, read one contiguous run at a time with `pull(offset,
    count)` (MessageCache.pull, or another group's queue: RemoteQueues.pull)."""
    found: dict[int, CachedMessage | None] = {}
    index = 0
    while index < len(offsets):
        start = end = offsets[index]
        while index < len(offsets) and offsets[index] == end:  # one contiguous run
            index += 1
            end += 1
        offset = start
        while offset < end:
            got = await pull(offset, end - offset)
            for _, queue_offset, cached in got.messages:
                if offset <= queue_offset < end:
                    found[queue_offset] = cached
            if got.next_begin_offset <= offset:
                break
            offset = got.next_begin_offset
    return found
