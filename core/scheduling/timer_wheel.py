"""The timer wheel: pending timer messages by the second the timer service must look at them, in memory and
free of I/O (core.scheduling.timers reads and writes the store).

An entry is a parked record: its commit-log offset (where to read it) and its offset in the timer queue (where
a rebuild after a restart starts reading). Seconds with entries are kept in a heap, so the cost of a tick follows
the entries due, not the entries pending (RocketMQ's TimerWheel has a slot per second of its window; a heap needs
no window and holds only seconds that have entries). A second's entries sit in one array of 64-bit integers:
8 bytes per pending message.

`fired_through` is the progress: every second up to it has been fired. A second is taken from the wheel when it
is due and marked done once all of its messages have been moved on; until then it is `firing`, and an entry added
meanwhile goes to a later second (`earliest`), never to one that is done or under way, so that no entry can fall
behind the progress a restart trusts.
"""

from __future__ import annotations

import heapq
from array import array


class TimerWheel:
    def __init__(self, fired_through: int) -> None:
        self.fired_through = fired_through
        self.firing: int | None = None
        self._slots: dict[int, array[int]] = {}
        self._queue_offsets: dict[int, array[int]] = {}
        self._seconds: list[int] = []
        self._pending = 0

    def __len__(self) -> int:
        return self._pending

    @property
    def earliest(self) -> int:
        """The earliest second an entry added now may take."""
        firing = self.firing
        return max(self.fired_through, firing if firing is not None else self.fired_through) + 1

    def add(self, second: int, commit_log_offset: int, queue_offset: int) -> int:
        """Add an entry due at `second` (or at `earliest` if that is later); return the second it took."""
        second = max(second, self.earliest)
        slot = self._slots.get(second)
        if slot is None:
            slot = self._slots[second] = array("q")
            self._queue_offsets[second] = array("q")
            heapq.heappush(self._seconds, second)
        slot.append(commit_log_offset)
        self._queue_offsets[second].append(queue_offset)
        self._pending += 1
        return second

    def next_second(self) -> int | None:
        return self._seconds[0] if self._seconds else None

    def take(self, second: int) -> list[int]:
        """Take the entries of the earliest second, `second`, to fire them: the second is `firing` until `done`."""
        if not self._seconds or self._seconds[0] != second:
            raise ValueError(f"second {second} is not the earliest in the wheel ({self.next_second()})")
        heapq.heappop(self._seconds)
        self.firing = second
        offsets = self._slots.pop(second)
        del self._queue_offsets[second]
        self._pending -= len(offsets)
        return offsets.tolist()

    def done(self, second: int) -> None:
        """Every entry taken for `second` has been moved on."""
        self.fired_through = max(self.fired_through, second)
        self.firing = None

    def low_water(self, default: int) -> int:
        """The lowest timer-queue offset of an entry still pending (not taken), else `default`.
        A rebuild reads the queue from here."""
        low = default
        for offsets in self._queue_offsets.values():
            if offsets:
                low = min(low, min(offsets))
        return low
