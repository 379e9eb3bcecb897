"""The clock a target's retry schedule runs on: the system's, or one a test moves by hand.

Retry policies wait up to 15 minutes between attempts and give up after 24 hours; a test of that schedule
replaces the clock rather than sleeping.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float:
        """Seconds since the epoch (what store timestamps are compared with)."""

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    def time(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class ManualClock:
    """Time moves only when `advance` is called; sleepers wake when their time has come."""

    def __init__(self, start: float | None = None) -> None:
        self._now = time.time() if start is None else start
        self._sleepers: list[tuple[float, asyncio.Future[None]]] = []

    def time(self) -> float:
        return self._now

    async def sleep(self, seconds: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self._now + max(0.0, seconds), future))
        try:
            await future
        finally:
            self._sleepers = [(due, f) for due, f in self._sleepers if f is not future]

    @property
    def sleepers(self) -> int:
        return sum(1 for _, future in self._sleepers if not future.done())

    def next_wake(self) -> float | None:
        due = [when for when, future in self._sleepers if not future.done()]
        return min(due) if due else None

    def advance(self, seconds: float) -> None:
        self._now += seconds
        for due, future in self._sleepers:
            if due <= self._now and not future.done():
                future.set_result(None)
