"""Deadlines for many concurrent operations, kept by one loop timer per `resolution_s` instead of one per operation.

`asyncio.timeout_at` builds an `asyncio.Timeout` and arms a loop timer for every use, and cancels the timer on
exit: under uvloop about 4.5 us, a twentieth of an HTTP delivery's CPU (bench/eventbridge.py). A `Deadline`
from `Deadlines.after` is the same context manager, with asyncio's semantics (the task is cancelled, the block
raises TimeoutError, a cancellation from elsewhere stays CancelledError), but it arms no timer of its own: open
deadlines are filed in slots of `resolution_s` by when they fall due, and one sweep per slot, at the slot's end,
cancels the tasks whose deadlines are still open. Entering and leaving costs about 1 us.

The price is precision: an operation is cancelled at its deadline or up to `resolution_s` (10 ms by default)
after it (plus the loop's own timer latency), never before. HTTP targets' timeouts are whole milliseconds, at
least 1 and typically seconds. A `Deadlines` serves one event loop at a time.
"""

from __future__ import annotations

import asyncio
import heapq
import math
from types import TracebackType

# How late past its deadline an operation may be cancelled; also the shortest interval between two sweeps.
RESOLUTION_S = 0.01


class Deadline:
    """An async context manager: the task running the block is cancelled once the loop's time passes `when` (within
    the resolution of the `Deadlines` that made it), and TimeoutError is raised out of the block in place of that
    cancellation, exactly as `asyncio.timeout_at` does: a cancellation from elsewhere still comes out as
    CancelledError (the task's cancel count tells them apart). Use once, in a task."""

    __slots__ = ("_cancelling", "_expired", "_open", "_owner", "_task", "slot", "when")

    def __init__(self, owner: Deadlines, when: float) -> None:
        self.when = when
        self.slot = 0
        self._owner = owner
        self._task: asyncio.Task[object] | None = None
        self._cancelling = 0
        self._open = False
        self._expired = False

    async def __aenter__(self) -> Deadline:
        if self._task is not None:
            raise RuntimeError("a Deadline is entered once")
        # The loop `after` found (current_task() without it asks for the running loop: a system call in 3.11).
        task = asyncio.current_task(self._owner._loop)
        if task is None:
            raise RuntimeError("a Deadline is used inside a task")
        self._task = task
        self._cancelling = task.cancelling()
        self._open = True
        self._owner._add(self)
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        if self._open:
            self._open = False
            self._owner._remove(self)
            return
        assert self._task is not None
        # Expired: take back our cancellation; if no other is pending, the CancelledError it caused is ours.
        if self._task.uncancel() <= self._cancelling and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc

    def expired(self) -> bool:
        """Whether the deadline passed while the block ran (as asyncio.Timeout.expired)."""
        return self._expired

    def _expire(self) -> None:
        assert self._task is not None
        self._open = False
        self._expired = True
        self._task.cancel()


class Deadlines:
    """Open deadlines by slot (`when` rounded up to a multiple of `resolution_s`), and the one timer that sweeps
    the earliest slot."""

    def __init__(self, resolution_s: float = RESOLUTION_S) -> None:
        if not resolution_s > 0:
            raise ValueError(f"resolution_s must be positive, not {resolution_s!r}")
        self.resolution_s = resolution_s
        self._slots: dict[int, set[Deadline]] = {}
        self._order: list[int] = []  # the keys of _slots, as a heap
        self._sweep: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def after(self, seconds: float) -> Deadline:
        """A deadline `seconds` from now, on the running loop's clock. Raises RuntimeError on another loop while
        deadlines of the first are open."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            if self._order:
                raise RuntimeError("Deadlines used on a second event loop while deadlines of the first are open")
            self._loop = loop
        return Deadline(self, loop.time() + seconds)

    def open_count(self) -> int:
        """Deadlines entered and not yet left or expired."""
        return sum(len(entries) for entries in self._slots.values())

    def _add(self, deadline: Deadline) -> None:
        slot = math.ceil(deadline.when / self.resolution_s)
        deadline.slot = slot
        entries = self._slots.get(slot)
        if entries is None:
            entries = self._slots[slot] = set()
            heapq.heappush(self._order, slot)
            if self._sweep is None or slot == self._order[0]:
                self._arm()
        entries.add(deadline)

    def _remove(self, deadline: Deadline) -> None:
        entries = self._slots.get(deadline.slot)
        if entries is not None:
            entries.discard(deadline)  # an emptied slot is dropped by its sweep, which costs less than here

    def _arm(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
        assert self._loop is not None
        self._sweep = self._loop.call_at(self._order[0] * self.resolution_s, self._expire_due)

    def _expire_due(self) -> None:
        self._sweep = None
        assert self._loop is not None
        now = self._loop.time()
        order = self._order
        while order and order[0] * self.resolution_s <= now:
            for deadline in self._slots.pop(heapq.heappop(order)):
                deadline._expire()
        if order:
            self._arm()
