"""The clock the broker's scheduled work runs on: delay levels, timer messages, transaction check-backs.

`SystemClock` is wall time (milliseconds since the epoch, as RocketMQ's deliver timestamps) and real sleeps.
`ManualClock` moves only when told to: tests schedule a message two hours or ten days ahead and move the clock
there instead of sleeping. Both wake a sleeper early when its `wake` event is set (a new message due sooner).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int:
        """Milliseconds since the epoch."""
        ...

    async def sleep_until(self, deadline_ms: int, wake: asyncio.Event | None = None) -> None:
        """Return once `now_ms()` reaches `deadline_ms`, or earlier when `wake` is set."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000

    async def sleep_until(self, deadline_ms: int, wake: asyncio.Event | None = None) -> None:
        delay = (deadline_ms - self.now_ms()) / 1000
        if delay <= 0:
            return
        if wake is None:
            await asyncio.sleep(delay)
            return
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(delay):  # not wait_for: see core.long_poll
                await wake.wait()


class ManualClock:
    """A clock for tests: it starts at `start_ms` and moves only by `advance` or `set`."""

    def __init__(self, start_ms: int | None = None) -> None:
        self._now = time.time_ns() // 1_000_000 if start_ms is None else start_ms
        self._moved: set[asyncio.Event] = set()

    def now_ms(self) -> int:
        return self._now

    def set(self, now_ms: int) -> None:
        if now_ms < self._now:
            raise ValueError(f"a ManualClock does not go back: {now_ms} is before {self._now}")
        self._now = now_ms
        for moved in self._moved:
            moved.set()

    def advance(self, seconds: float) -> None:
        self.set(self._now + round(seconds * 1000))

    async def sleep_until(self, deadline_ms: int, wake: asyncio.Event | None = None) -> None:
        moved = asyncio.Event()
        self._moved.add(moved)
        try:
            while self._now < deadline_ms and not (wake is not None and wake.is_set()):
                if wake is None:
                    await moved.wait()
                else:
                    waits = [asyncio.ensure_future(moved.wait()), asyncio.ensure_future(wake.wait())]
                    try:
                        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                    finally:
                        for waiting in waits:
                            waiting.cancel()
                moved.clear()
        finally:
            self._moved.discard(moved)
