"""What sink and source runners share: a task's state (RUNNING, PAUSED, FAILED), its asyncio task, the pause gate,
retries with exponential backoff, and the wake-up when messages arrive in a queue."""

from __future__ import annotations

import abc
import asyncio
import contextlib
import enum
import logging
import traceback
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from connectors.api import Task

log = logging.getLogger(__name__)

T = TypeVar("T")

# The first wait after a failure; it doubles up to errors.retry.delay.max.ms (Kafka Connect starts at 300 ms).
INITIAL_RETRY_DELAY_S = 0.1


class State(enum.Enum):
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    UNASSIGNED = "UNASSIGNED"


@dataclass(slots=True, frozen=True)
class ErrorPolicy:
    """The errors.* keys of a connector config (api.COMMON_CONFIG)."""

    tolerate_all: bool = False
    retry_timeout_ms: int = 0
    retry_delay_max_ms: int = 60_000
    dead_letter_topic: str = ""
    dead_letter_context: bool = True
    log_errors: bool = False
    log_messages: bool = False

    @classmethod
    def of(cls, values: dict[str, Any]) -> ErrorPolicy:
        return cls(
            values.get("errors.tolerance", "none") == "all",
            int(values.get("errors.retry.timeout", 0)),
            int(values.get("errors.retry.delay.max.ms", 60_000)),
            str(values.get("errors.deadletterqueue.topic.name", "") or ""),
            _flag(values.get("errors.deadletterqueue.context.headers.enable", True)),
            _flag(values.get("errors.log.enable", False)),
            _flag(values.get("errors.log.include.messages", False)),
        )

    def backoff(self) -> Backoff:
        return Backoff(self, asyncio.get_running_loop().time())

    async def retry(self, what: str, call: Callable[[], Awaitable[T]]) -> T:
        """`call()`, again after a failure with exponential backoff until `retry_timeout_ms` has passed; the last
        failure is raised."""
        started = asyncio.get_running_loop().time()
        backoff: Backoff | None = None  # made on the first failure: most calls succeed at once
        while True:
            try:
                return await call()
            except Exception as exc:
                if backoff is None:
                    backoff = Backoff(self, started)
                wait = backoff.next_wait()
                if wait is None:
                    raise
                log.warning("%s failed (attempt %d; again in %.2f s): %s", what, backoff.attempts, wait, exc)
                await asyncio.sleep(wait)


def _flag(value: Any) -> bool:
    # Parsed configs hold booleans; the runtime's own configs (EventBridge targets) may hold strings.
    return value if isinstance(value, bool) else str(value).strip().lower() == "true"


class Backoff:
    """The waits between attempts: doubling from INITIAL_RETRY_DELAY_S, capped by errors.retry.delay.max.ms, until
    errors.retry.timeout ms after the first attempt."""

    def __init__(self, policy: ErrorPolicy, start: float) -> None:
        self.deadline = start + policy.retry_timeout_ms / 1000
        self.cap = policy.retry_delay_max_ms / 1000
        self.delay = INITIAL_RETRY_DELAY_S
        self.attempts = 0

    def next_wait(self) -> float | None:
        """The wait before the next attempt, or None when no attempt is left."""
        self.attempts += 1
        remaining = self.deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            return None
        wait = min(self.delay, remaining, self.cap)
        self.delay *= 2
        return wait


class _Settable(Protocol):
    def set(self) -> None: ...


# How often the waits on arrival flags are looked over for one past its backstop (ArrivalFlag.wait).
BACKSTOP_TICK_S = 1.0


class Arrivals:
    """Wakes runners waiting for messages in given queues (one broker arrival listener for the whole worker)."""

    def __init__(self) -> None:
        self._waiters: dict[tuple[str, int], set[_Settable]] = {}
        # Flags being waited on, with when each wait's backstop ends; one task looks them over every tick, so a
        # wait costs no timer of its own (10,000 idle EventBridge targets kept 10,000 timers and their objects).
        self._waiting: dict[ArrivalFlag, float] = {}
        self._backstop: asyncio.Task[None] | None = None

    def notify(self, queues: set[tuple[str, int]]) -> None:
        for queue in queues:
            for waiter in self._waiters.get(queue, ()):
                waiter.set()

    def flag(self, queues: Iterable[tuple[str, int]]) -> ArrivalFlag:
        """A flag set by every arrival in `queues` until it is closed: a reader clears it, reads, and waits on it
        only if nothing arrived since (no registration, no empty read per wait)."""
        flag = ArrivalFlag(self, list(queues))
        for key in flag.queues:
            self._waiters.setdefault(key, set()).add(flag)
        return flag

    def _discard(self, keys: list[tuple[str, int]], waiter: _Settable) -> None:
        for key in keys:
            waiters = self._waiters.get(key)
            if waiters is not None:
                waiters.discard(waiter)
                if not waiters:
                    del self._waiters[key]

    def _waiting_until(self, flag: ArrivalFlag, deadline: float) -> None:
        self._waiting[flag] = deadline
        if self._backstop is None or self._backstop.done():
            self._backstop = asyncio.get_running_loop().create_task(self._look_over(), name="arrival backstop")

    async def _look_over(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiting:
            await asyncio.sleep(BACKSTOP_TICK_S)
            now = loop.time()
            for flag in [flag for flag, deadline in self._waiting.items() if deadline <= now]:
                flag.set()

    async def close(self) -> None:
        """Stop looking over the waits (their runners are stopped)."""
        if self._backstop is not None:
            self._backstop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._backstop
            self._backstop = None

    async def wait(self, queues: Iterable[tuple[str, int]], timeout_s: float) -> None:
        event = asyncio.Event()
        keys = list(queues)
        for key in keys:
            self._waiters.setdefault(key, set()).add(event)
        try:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await event.wait()
        finally:
            self._discard(keys, event)


class ArrivalFlag:
    """Set when a message arrives in one of its queues (Arrivals.flag); closed when its reader stops."""

    __slots__ = ("_set", "_waiter", "arrivals", "queues")

    def __init__(self, arrivals: Arrivals, queues: list[tuple[str, int]]) -> None:
        self.arrivals = arrivals
        self.queues = queues
        self._set = False
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        self._set = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    def is_set(self) -> bool:
        return self._set

    async def wait(self, timeout_s: float) -> None:
        """Until an arrival, or about `timeout_s` (to within BACKSTOP_TICK_S; a backstop for a missed wake-up)."""
        if self._set:
            return
        loop = asyncio.get_running_loop()
        self._waiter = loop.create_future()
        self.arrivals._waiting_until(self, loop.time() + timeout_s)
        try:
            await self._waiter
        finally:
            self._waiter = None
            self.arrivals._waiting.pop(self, None)

    def close(self) -> None:
        self.arrivals._discard(self.queues, self)


class TaskRunner(abc.ABC):
    """Runs one task in its own asyncio task until stopped or failed."""

    def __init__(self, connector: str, task_id: int, task: Task, config: dict[str, Any], paused: bool) -> None:
        self.connector = connector
        self.task_id = task_id
        self.task = task
        self.config = config
        self.state = State.PAUSED if paused else State.RUNNING
        self.trace: str | None = None
        self._unpaused = asyncio.Event()
        if not paused:
            self._unpaused.set()
        # Held while a batch is read, delivered and committed: pause() waits for it, so nothing is consumed after.
        self._busy = asyncio.Lock()
        self._main_task: asyncio.Task[None] | None = None
        self._task_started = False

    @property
    def label(self) -> str:
        return f"connector {self.connector!r} task {self.task_id}"

    def start(self) -> None:
        self._main_task = asyncio.get_running_loop().create_task(self._main(), name=self.label)

    async def _main(self) -> None:
        try:
            await self._run()
        except asyncio.CancelledError:
            raise
        except Exception:
            self.state = State.FAILED
            self.trace = traceback.format_exc()
            log.error("%s failed; it stays FAILED until restarted:\n%s", self.label, self.trace)
        finally:
            await self._finish()

    async def _finish(self) -> None:
        """After the loop ended (stop, failure): release the task."""
        if self._task_started:
            self._task_started = False
            try:
                await self.task.stop()
            except Exception:
                log.exception("%s: stop failed", self.label)

    @abc.abstractmethod
    async def _run(self) -> None:
        """The task's loop; returns only by raising."""

    async def _gate(self) -> None:
        """Wait while paused."""
        await self._unpaused.wait()

    @property
    def paused(self) -> bool:
        return not self._unpaused.is_set()

    async def pause(self) -> None:
        """Stop consuming or polling; returns once a batch in flight is done."""
        if self.state is not State.FAILED:
            self.state = State.PAUSED
        self._unpaused.clear()
        async with self._busy:
            pass

    def resume(self) -> None:
        if self.state is not State.FAILED:
            self.state = State.RUNNING
        self._unpaused.set()

    async def stop(self) -> None:
        if self._main_task is None:
            return
        self._main_task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._main_task
        self._main_task = None
