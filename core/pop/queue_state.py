"""The pop bookkeeping of one consumer group in one queue (pop.py's PopService reads, commits and hands out; this
holds what was read and not acked, in flight or held back, and the offsets that follow from it). Pure: no store,
no clock of its own (deadlines are on the service's clock)."""

from __future__ import annotations

import collections
import heapq
from dataclasses import dataclass

# RocketMQ's popCkOffsetMaxQueueSize: past this many unacked messages in one queue, the queue gives no more until
# some are acked. It bounds the memory of one group that never acks (about 100 bytes a message, no bodies).
MAX_UNACKED_PER_QUEUE = 20_000
# The expiry heap drops stale items lazily; past this many beyond twice the live ones it is rebuilt.
_HEAP_SLACK = 1024


@dataclass(slots=True)
class PopEntry:
    """A message read from its queue and not acked. `attempts == 0` means held back: never delivered yet."""

    offset: int
    commit_log_offset: int
    message_group: str | None
    attempts: int = 0
    delivery_id: int = 0
    invisible_until: float = 0.0


class PopQueueState:
    """What one group knows about one queue. Pure bookkeeping: reads and offset commits are the service's."""

    __slots__ = ("busy", "committed", "cursor", "entries", "expiry", "held", "queue_id", "ready")

    def __init__(self, queue_id: int, offset: int) -> None:
        self.queue_id = queue_id
        self.cursor = offset
        self.committed = offset
        # OrderedDict, not dict: entries are added in offset order and removed from anywhere, and the first key
        # (the lowest unacked offset) must stay O(1) to find after many removals at the front.
        self.entries: collections.OrderedDict[int, PopEntry] = collections.OrderedDict()
        # (invisible_until, offset, delivery_id); items of acked or changed deliveries are dropped when met.
        self.expiry: list[tuple[float, int, int]] = []
        # FIFO: message group -> offset of its delivered, unacked message; the offsets held back behind it; and
        # the groups whose first held message may go out now (a dict used as an ordered set).
        self.busy: dict[str, int] = {}
        self.held: dict[str, collections.deque[int]] = {}
        self.ready: dict[str, None] = {}

    @property
    def low_water(self) -> int:
        """The lowest offset not done: what the group's committed offset must be."""
        for offset in self.entries:
            return offset
        return self.cursor

    @property
    def full(self) -> bool:
        return len(self.entries) >= MAX_UNACKED_PER_QUEUE

    def next_deadline(self) -> float | None:
        """The earliest invisible-until of a message in flight, or None."""
        expiry = self.expiry
        while expiry:
            until, offset, delivery_id = expiry[0]
            entry = self.entries.get(offset)
            if entry is not None and entry.delivery_id == delivery_id:
                return until
            heapq.heappop(expiry)
        return None

    def take_expired(self, now: float, limit: int) -> list[PopEntry]:
        """Up to `limit` messages whose invisible time has passed, to deliver again."""
        found: list[PopEntry] = []
        while len(found) < limit:
            until = self.next_deadline()
            if until is None or until > now:
                break
            _, offset, _ = heapq.heappop(self.expiry)
            found.append(self.entries[offset])
        return found

    def take_ready(self, limit: int) -> list[PopEntry]:
        """Up to `limit` held messages whose message group has nothing in flight any more (FIFO)."""
        found: list[PopEntry] = []
        while self.ready and len(found) < limit:
            group = next(iter(self.ready))
            del self.ready[group]
            waiting = self.held[group]
            offset = waiting.popleft()
            if not waiting:
                del self.held[group]
            self.busy[group] = offset
            found.append(self.entries[offset])
        return found

    def add(self, offset: int, commit_log_offset: int, message_group: str | None) -> PopEntry | None:
        """Record a message just read; returns it if it may be delivered now, None if it is held back."""
        entry = PopEntry(offset, commit_log_offset, message_group)
        self.entries[offset] = entry
        if message_group is not None:
            if message_group in self.busy or message_group in self.held:
                self.held.setdefault(message_group, collections.deque()).append(offset)
                return None
            self.busy[message_group] = offset
        return entry

    def deliver(self, entry: PopEntry, until: float, delivery_id: int, *, again: bool = True) -> None:
        """Make `entry` invisible until `until` under a new delivery id; `again=False` for a change of invisible
        time, which is not a new delivery attempt."""
        if again:
            entry.attempts += 1
        entry.delivery_id = delivery_id
        entry.invisible_until = until
        heapq.heappush(self.expiry, (until, entry.offset, delivery_id))
        if len(self.expiry) > 2 * len(self.entries) + _HEAP_SLACK:
            self.expiry = [
                (e.invisible_until, e.offset, e.delivery_id) for e in self.entries.values() if e.attempts > 0
            ]
            heapq.heapify(self.expiry)

    def remove(self, offset: int) -> bool:
        """The message is done (acked, or gone from the store). True when that frees a held message (FIFO)."""
        entry = self.entries.pop(offset)
        group = entry.message_group
        if group is None or self.busy.get(group) != offset:
            return False
        del self.busy[group]
        if group in self.held:
            self.ready[group] = None
            return True
        return False
