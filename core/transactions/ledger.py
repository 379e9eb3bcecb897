"""The transaction service's bookkeeping, in memory and free of I/O (core.transactions.service reads and writes the
store):
which half messages are undecided, when each is checked next and how often it was checked, and how far the half
queue and the op queue are settled, the progress a restart reads from.

A half message is named by its offset in the half queue (RocketMQ's tranStateTableOffset); an op record names
the halves it decided by those offsets. A half goes through three states:

    undecided --take--> deciding --decided (op record written)--> forgotten
        ^                  |
        +----restore-------+    (its copy could not be stored: undecided again)

`deciding` holds a half while its commit copy and op record are being written: a second end, a check's answer or
a discard finds it neither undecided nor takeable, so it is decided once.

Progress: the half offset is the lowest half not yet decided (or the end of the half queue); every half before it
is decided. The op offset is the first op record that names a half at or past the half offset (RocketMQ's
calculateOpOffset): a restart reads op records from there to learn which later halves are decided, and halves
from the half offset to find the undecided ones. Both only move forward, each offset passed once.

Check times: a half is first checked at `first_check_ms` (kept in its half-queue entry's tag code), then every
`interval_ms`: check n + 1 is due at first_check_ms + n * interval_ms. Due halves come from a heap, so a round
costs the halves due, not the halves pending.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(slots=True)
class Half:
    queue_offset: int
    commit_log_offset: int
    first_check_ms: int
    checks: int = 0
    # Stored before this run started: a crash may have left its commit copy (or its copy in
    # TRANS_CHECK_MAX_TIME_TOPIC) stored without the op record that says so. Looked for before it is checked or ended.
    in_doubt: bool = False

    def due_ms(self, interval_ms: int) -> int:
        return self.first_check_ms + self.checks * interval_ms


class TransactionLedger:
    def __init__(self, interval_ms: int, half_offset: int = 0, op_offset: int = 0) -> None:
        self.interval_ms = interval_ms
        self._undecided: dict[int, Half] = {}
        self._deciding: dict[int, Half] = {}
        # (due ms, queue offset): a half may have stale entries (it was checked or decided since); `_due_valid`
        # tells them apart, so nothing is removed from the middle of the heap.
        self._heap: list[tuple[int, int]] = []
        self._half_offset = half_offset
        self._half_end = half_offset
        self._op_offset = op_offset
        self._op_end = op_offset
        self._ops: dict[int, tuple[int, ...]] = {}  # op records at or past the op offset -> the halves they name

    # --- halves --------------------------------------------------------------------------------------------------

    def add(self, half: Half) -> None:
        """A half message stored (or found undecided by a rebuild)."""
        if half.queue_offset < self._half_offset or half.queue_offset in self._deciding:
            return
        self._undecided[half.queue_offset] = half
        self._half_end = max(self._half_end, half.queue_offset + 1)
        heapq.heappush(self._heap, (half.due_ms(self.interval_ms), half.queue_offset))

    def half_queue_ends_at(self, end: int) -> None:
        """Every half before `end` is known: those not added are decided (or holes)."""
        self._half_end = max(self._half_end, end)
        self._advance()

    def get(self, queue_offset: int) -> Half | None:
        """The half at `queue_offset` if it is undecided."""
        return self._undecided.get(queue_offset)

    def is_deciding(self, queue_offset: int) -> bool:
        return queue_offset in self._deciding

    def take(self, queue_offset: int) -> Half | None:
        """Take an undecided half to decide it; None if it is not undecided (decided, or being decided)."""
        half = self._undecided.pop(queue_offset, None)
        if half is not None:
            self._deciding[queue_offset] = half
        return half

    def restore(self, half: Half) -> None:
        """A half taken but not decided after all (its copy could not be stored): undecided again, checked as before."""
        if self._deciding.pop(half.queue_offset, None) is not None:
            self._undecided[half.queue_offset] = half
            heapq.heappush(self._heap, (half.due_ms(self.interval_ms), half.queue_offset))

    def decided(self, halves: Iterable[int], op_queue_offset: int | None = None) -> None:
        """An op record (at `op_queue_offset` in the op queue, when known) says `halves` are decided."""
        halves = tuple(halves)
        for queue_offset in halves:
            self._undecided.pop(queue_offset, None)
            self._deciding.pop(queue_offset, None)
        if op_queue_offset is not None and op_queue_offset >= self._op_offset:
            self._ops[op_queue_offset] = halves
            self._op_end = max(self._op_end, op_queue_offset + 1)
        self._advance()

    def op_queue_ends_at(self, end: int) -> None:
        """Every op record before `end` is known (records not noted are not ours: they decide nothing)."""
        self._op_end = max(self._op_end, end)
        self._advance()

    # --- checks --------------------------------------------------------------------------------------------------

    def _due_valid(self, due_ms: int, queue_offset: int) -> Half | None:
        half = self._undecided.get(queue_offset)
        if half is None or half.due_ms(self.interval_ms) != due_ms:
            return None
        return half

    def next_due(self) -> int | None:
        """When the earliest undecided half is due for a check, or None when there is none."""
        heap = self._heap
        while heap:
            due_ms, queue_offset = heap[0]
            if self._due_valid(due_ms, queue_offset) is not None:
                return due_ms
            heapq.heappop(heap)
        return None

    def due(self, now_ms: int) -> list[Half]:
        """The undecided halves due for a check at `now_ms`, in the order they fell due. Each must then be `checked`,
        `take`n or `requeue`d: until then it is off the schedule."""
        heap = self._heap
        found: dict[int, Half] = {}
        while heap and heap[0][0] <= now_ms:
            due_ms, queue_offset = heapq.heappop(heap)
            half = self._due_valid(due_ms, queue_offset)
            if half is not None:
                found[queue_offset] = half
        return list(found.values())

    def checked(self, half: Half) -> None:
        """`half` was checked once more: its next check is due an interval later."""
        half.checks += 1
        self.requeue(half)

    def requeue(self, half: Half) -> None:
        """Put an undecided half back on the schedule at its due time (now, if that has passed)."""
        if self._undecided.get(half.queue_offset) is half:
            heapq.heappush(self._heap, (half.due_ms(self.interval_ms), half.queue_offset))

    # --- progress ------------------------------------------------------------------------------------------------

    @property
    def half_offset(self) -> int:
        return self._half_offset

    @property
    def op_offset(self) -> int:
        return self._op_offset

    def undecided_count(self) -> int:
        return len(self._undecided) + len(self._deciding)

    def undecided(self) -> list[Half]:
        return sorted([*self._undecided.values(), *self._deciding.values()], key=lambda half: half.queue_offset)

    def check_times(self) -> dict[int, int]:
        """The halves not decided that were checked at least once: queue offset -> checks (what a restart needs)."""
        return {half.queue_offset: half.checks for half in self.undecided() if half.checks}

    def _advance(self) -> None:
        offset = self._half_offset
        while offset < self._half_end and offset not in self._undecided and offset not in self._deciding:
            offset += 1
        self._half_offset = offset
        op = self._op_offset
        ops = self._ops
        while op < self._op_end and all(half < offset for half in ops.get(op, ())):
            ops.pop(op, None)
            op += 1
        self._op_offset = op
