"""Making the commit log durable: the flush thread and the writers waiting on it.

ASYNC_FLUSH: the thread flushes every `flush_interval_ms`; nobody waits.
SYNC_FLUSH (group commit, RocketMQ's GroupCommitService): a writer appends, registers the end offset of its
record and wakes the thread; one fdatasync covers every record appended before it started, so concurrent
writers share one fsync. The thread releases waiters with one call per event loop per flush, not one per
message. A waiter not released within `sync_flush_timeout_ms` gets False (FLUSH_DISK_TIMEOUT); its record stays
in the log and may still become durable.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from core.store.commit_log import CommitLog
from core.store.config import FlushMode

log = logging.getLogger(__name__)

# RocketMQ's GroupCommitService waits 10 ms for requests when idle.
GROUP_COMMIT_IDLE_WAIT_S = 0.01
# How often expired async waiters are swept (their timeout is checked at this granularity).
TIMEOUT_SWEEP_S = 0.1


class FlushWaiters:
    """Writers waiting for the flushed position to pass their record, from event loops or plain threads."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self._lock = threading.Lock()
        self._async: dict[asyncio.AbstractEventLoop, list[tuple[int, float, asyncio.Future[bool]]]] = {}
        self._sweeping: set[asyncio.AbstractEventLoop] = set()
        self._flushed = 0
        self._condition = threading.Condition(self._lock)

    def add_async(self, offset: int) -> asyncio.Future[bool]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        with self._lock:
            if self._flushed >= offset:
                future.set_result(True)
                return future
            self._async.setdefault(loop, []).append((offset, time.monotonic() + self.timeout_s, future))
            start_sweep = loop not in self._sweeping
            self._sweeping.add(loop)
        if start_sweep:
            loop.call_later(TIMEOUT_SWEEP_S, self._sweep, loop)
        return future

    def wait_blocking(self, offset: int) -> bool:
        with self._condition:
            return self._condition.wait_for(lambda: self._flushed >= offset, self.timeout_s)

    def release(self, flushed: int) -> None:
        """Called by the flush thread after each flush."""
        with self._condition:
            self._flushed = flushed
            self._condition.notify_all()
            ready = [loop for loop, waiters in self._async.items() if any(w[0] <= flushed for w in waiters)]
        for loop in ready:
            try:
                loop.call_soon_threadsafe(self._resolve, loop, flushed)
            except RuntimeError:  # the loop was closed
                with self._lock:
                    self._async.pop(loop, None)

    def _resolve(self, loop: asyncio.AbstractEventLoop, flushed: int) -> None:
        with self._lock:
            waiters = self._async.get(loop, [])
            done = [w for w in waiters if w[0] <= flushed]
            self._async[loop] = [w for w in waiters if w[0] > flushed]
        for _, _, future in done:
            if not future.done():
                future.set_result(True)

    def _sweep(self, loop: asyncio.AbstractEventLoop) -> None:
        now = time.monotonic()
        with self._lock:
            waiters = self._async.get(loop, [])
            expired = [w for w in waiters if w[1] <= now]
            if expired:
                self._async[loop] = [w for w in waiters if w[1] > now]
            again = bool(self._async.get(loop))
            if not again:
                self._sweeping.discard(loop)
        for _, _, future in expired:
            if not future.done():
                future.set_result(False)
        if again:
            loop.call_later(TIMEOUT_SWEEP_S, self._sweep, loop)


class FlushService:
    def __init__(
        self,
        commit_log: CommitLog,
        mode: FlushMode,
        interval_ms: int,
        waiters: FlushWaiters,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        self.commit_log = commit_log
        self.mode = mode
        self.interval_s = interval_ms / 1000
        self.waiters = waiters
        self.on_error = on_error
        self.flushes = 0
        # True while the thread waits for work: writers wake it only then, so a busy flusher costs them nothing.
        self.sleeping = False
        self._wakeup = threading.Event()
        self._stopped = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mqgate-flush", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        self._wakeup.set()

    def _run(self) -> None:
        if self.mode is FlushMode.SYNC_FLUSH:
            self._run_group_commit()
        else:
            self._run_interval()

    def _run_interval(self) -> None:
        """ASYNC_FLUSH: flush every interval."""
        while not self._stopped:
            self._wakeup.wait(self.interval_s)
            self._wakeup.clear()
            self.flush_once()

    def _run_group_commit(self) -> None:
        """SYNC_FLUSH: flush back to back while records wait; sleep (briefly) only when all is on disk."""
        commit_log = self.commit_log
        while not self._stopped:
            if commit_log.write_pos <= commit_log.flushed_pos:
                self.sleeping = True
                # Re-check after raising the flag: a writer that appended before it saw sleeping=False.
                if commit_log.write_pos <= commit_log.flushed_pos:
                    self._wakeup.wait(GROUP_COMMIT_IDLE_WAIT_S)
                self.sleeping = False
                self._wakeup.clear()
            self.flush_once()

    def flush_once(self) -> int:
        try:
            before = self.commit_log.flushed_pos
            flushed = self.commit_log.flush()
            if flushed > before:
                self.flushes += 1
        except OSError as exc:
            # Waiters time out (FLUSH_DISK_TIMEOUT); the thread keeps trying: a transient error may pass.
            log.error("commit-log flush failed: %s", exc)
            if self.on_error is not None:
                self.on_error(exc)
            time.sleep(self.interval_s)
            return self.commit_log.flushed_pos
        self.waiters.release(flushed)
        return flushed

    def stop(self) -> None:
        self._stopped = True
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.flush_once()
