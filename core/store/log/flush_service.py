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
import bisect
import logging
import threading
import time
from collections.abc import Callable

from core.store.config import FlushMode
from core.store.log.commit_log import CommitLog
from core.store.service_thread import ServiceThread

log = logging.getLogger(__name__)

# RocketMQ's GroupCommitService waits 10 ms for requests when idle.
GROUP_COMMIT_IDLE_WAIT_S = 0.01
# How often expired async waiters are swept (their timeout is checked at this granularity).
TIMEOUT_SWEEP_S = 0.1
# Upper bounds, in seconds, of the buckets flush times are counted in. An fdatasync of a few pages takes 0.1-2 ms on
# an SSD and 5-50 ms on a spinning disk or a busy cloud volume; past 1 s SYNC_FLUSH writers near their 5 s timeout.
FLUSH_BUCKETS_S = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class FlushTimes:
    """How long each flush of the commit log that wrote something took: counts per bucket (FLUSH_BUCKETS_S, then
    one for anything longer), their sum and number. Written by the flush thread alone, without a lock; whoever
    reports them (mqgate's metrics, which the store knows nothing of) reads `snapshot`."""

    __slots__ = ("bounds", "counts", "total_s")

    def __init__(self, bounds: tuple[float, ...] = FLUSH_BUCKETS_S) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total_s = 0.0

    def record(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, seconds)] += 1
        self.total_s += seconds

    def snapshot(self) -> tuple[list[int], float]:
        """(count per bucket, the last one past every bound; sum of seconds). The counts are copied in one step, so
        their total is the number of flushes even while the flush thread records one."""
        return list(self.counts), self.total_s


class FlushWaiters:
    """Writers waiting for the flushed position to pass their record, from event loops or plain threads.

    Each event loop's waiters live in a list touched only by that loop's thread; the flush thread only asks
    each loop, with one call_soon_threadsafe per flush, to release what is flushed. So registering a waiter
    takes no lock, and the writers between two flushes share one future (_LoopWaiters).
    """

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.flushed = 0
        # Counts flushes started: the flush thread adds one before it reads how far the log is written.
        self.generation = 0
        self._loops: dict[asyncio.AbstractEventLoop, _LoopWaiters] = {}
        self._condition = threading.Condition()

    def add_async(self, offset: int) -> asyncio.Future[bool]:
        """A future that gets True once the log is on disk up to `offset` (False after the timeout); called after
        the record is appended."""
        loop = asyncio.get_running_loop()
        waiters = self._loops.get(loop)
        if waiters is None:
            waiters = self._loops[loop] = _LoopWaiters(loop, self.timeout_s)
        return waiters.add(offset, self.flushed, self.generation)

    def flush_starting(self) -> None:
        """Called by the flush thread before each flush reads its target: writers that register from now on wait in
        a new group, which that flush may not cover."""
        self.generation += 1

    def wait_blocking(self, offset: int) -> bool:
        with self._condition:
            return self._condition.wait_for(lambda: self.flushed >= offset, self.timeout_s)

    def release(self, flushed: int) -> None:
        """Called by the flush thread after each flush."""
        self.flushed = flushed
        with self._condition:
            self._condition.notify_all()
        for loop, waiters in list(self._loops.items()):
            if waiters.pending:
                try:
                    loop.call_soon_threadsafe(waiters.resolve, flushed)
                except RuntimeError:  # the loop was closed
                    self._loops.pop(loop, None)


class _Group:
    """Writers of one event loop that registered while the same flushes had started: one future for all."""

    __slots__ = ("deadline", "future", "generation", "highest")

    def __init__(self, highest: int, deadline: float, future: asyncio.Future[bool], generation: int) -> None:
        self.highest = highest  # the highest end offset among them
        self.deadline = deadline  # when the first of them times out
        self.future = future
        self.generation = generation  # FlushWaiters.generation when they registered


class _LoopWaiters:
    """The waiters of one event loop; only that loop's thread touches them.

    Writers that register between the starts of two flushes share one future (a group), and group commit's burst
    of writers costs one future, not one each. Every writer of a group appended before the next flush read its
    target (it registers after its append, and that flush starts a new generation before reading), so that flush
    covers the whole group: the group gets True once the flushed position passes its highest offset, never
    before. A group times out when its first writer would: the others may get FLUSH_DISK_TIMEOUT up to one flush
    early.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        self.loop = loop
        self.timeout_s = timeout_s
        self.pending: list[_Group] = []
        self.open: _Group | None = None  # the group new writers join
        self._sweeping = False

    def add(self, offset: int, flushed: int, generation: int) -> asyncio.Future[bool]:
        if flushed >= offset:
            future = self.loop.create_future()
            future.set_result(True)
            return future
        group = self.open
        if group is None or group.generation != generation:
            deadline = self.loop.time() + self.timeout_s
            group = self.open = _Group(offset, deadline, self.loop.create_future(), generation)
            self.pending.append(group)
            if not self._sweeping:
                self._sweeping = True
                self.loop.call_later(TIMEOUT_SWEEP_S, self._sweep)
        elif offset > group.highest:
            group.highest = offset
        return group.future

    def resolve(self, flushed: int) -> None:
        self._answer(lambda group: group.highest <= flushed, True)

    def _sweep(self) -> None:
        now = self.loop.time()
        if self._answer(lambda group: group.deadline <= now, False):
            self.loop.call_later(TIMEOUT_SWEEP_S, self._sweep)
        else:
            self._sweeping = False

    def _answer(self, due: Callable[[_Group], bool], result: bool) -> bool:
        """Give `result` to the groups that are `due` and keep the others; True if any still wait."""
        waiting: list[_Group] = []
        for group in self.pending:
            if due(group):
                if group is self.open:
                    self.open = None
                if not group.future.done():
                    group.future.set_result(result)
            else:
                waiting.append(group)
        self.pending = waiting
        return bool(waiting)


class FlushService(ServiceThread):
    def __init__(
        self,
        commit_log: CommitLog,
        mode: FlushMode,
        interval_ms: int,
        waiters: FlushWaiters,
        on_error: Callable[[BaseException], None] | None = None,
    ) -> None:
        super().__init__("mqgate-flush")
        self.commit_log = commit_log
        self.mode = mode
        self.interval_s = interval_ms / 1000
        self.waiters = waiters
        self.on_error = on_error
        self.flushes = 0
        self.times = FlushTimes()

    def run(self) -> None:
        if self.mode is FlushMode.SYNC_FLUSH:
            self._run_group_commit()
        else:
            self._run_interval()

    def _run_interval(self) -> None:
        """ASYNC_FLUSH: flush every interval."""
        while not self.stopped:
            self.wait(self.interval_s)
            # What the dispatcher has committed: a pwrite here too would take the GIL back and forth once more
            # while the appending thread needs it.
            self.flush_once(commit=False)

    def _run_group_commit(self) -> None:
        """SYNC_FLUSH: flush back to back while records wait; sleep (briefly) only when all is on disk."""
        commit_log = self.commit_log
        while not self.stopped:
            if commit_log.write_pos <= commit_log.flushed_pos:
                self.sleeping = True
                # Re-check after raising the flag: a writer that appended before it saw sleeping=False.
                if commit_log.write_pos <= commit_log.flushed_pos:
                    self.wait(GROUP_COMMIT_IDLE_WAIT_S)
                self.sleeping = False
            self.flush_once()

    def durable(self, offset: int) -> asyncio.Future[bool]:
        """SYNC_FLUSH: a future that gets True once the log is on disk up to `offset` (FlushWaiters.add_async), the
        thread woken if it sleeps. Called after the record is appended, from an event loop, once per message."""
        future = self.waiters.add_async(offset)
        if self.sleeping:
            self.wake_sleeping()
        return future

    def flush_once(self, commit: bool = True) -> int:
        try:
            before = self.commit_log.flushed_pos
            started = time.perf_counter()
            self.waiters.flush_starting()
            flushed = self.commit_log.flush(commit)
            if flushed > before:
                self.times.record(time.perf_counter() - started)
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
        super().stop()
        self.flush_once()


# How often the warmer looks again when the log is warm far enough ahead, and after a failed write. It starts
# warming when less than half of `ahead` is left, and then writes until `ahead` is: a flush never waits for zeros
# written a few kilobytes at a time.
WARM_IDLE_S = 0.02
WARM_RETRY_S = 1.0
# The warmer measures the flushes' groups over this long, and warms only while they average at most
# WARM_MAX_GROUP bytes. Allocating a flush's new blocks costs it about 90 us whatever its size, while warming costs
# a second write of every byte: small groups (128 B records from 64 writers: 16 KiB) gain, large ones (4 KiB
# records: 256 KiB a group, the log growing 300 MB/s) lost a quarter of their rate to the doubled writes.
WARM_SAMPLE_S = 0.1
WARM_MAX_GROUP = 128 * 1024


class SegmentWarmer(ServiceThread):
    """SYNC_FLUSH: keeps `ahead` bytes of the log past the write position written with zeros and on disk
    (CommitLog.warm), so that a group's fdatasync writes records into blocks already allocated and does not also
    commit their allocation to the file system's journal (RocketMQ's warmMapedFileEnable does it per segment);
    only while the groups flushed are small (WARM_MAX_GROUP)."""

    def __init__(self, commit_log: CommitLog, ahead: int, flusher: FlushService) -> None:
        super().__init__("mqgate-warm")
        self.commit_log = commit_log
        self.ahead = ahead
        self.flusher = flusher

    def run(self) -> None:
        commit_log = self.commit_log
        sampled_at, sampled_pos, sampled_flushes = time.monotonic(), commit_log.write_pos, self.flusher.flushes
        small_groups = True
        while not self.stopped:
            now = time.monotonic()
            if now - sampled_at >= WARM_SAMPLE_S:
                flushes = self.flusher.flushes - sampled_flushes
                small_groups = flushes == 0 or (commit_log.write_pos - sampled_pos) / flushes <= WARM_MAX_GROUP
                sampled_at, sampled_pos, sampled_flushes = now, commit_log.write_pos, self.flusher.flushes
            try:
                if small_groups and commit_log.warming.ahead < self.ahead // 2:
                    while not self.stopped and commit_log.warming.warm(self.ahead):
                        pass
            except OSError as exc:
                # Only the flushes' speed depends on it: the log itself is written as before.
                log.warning("commit log: writing zeros ahead of the log failed (%s); trying again in %.0f s", exc,
                            WARM_RETRY_S)  # fmt: skip
                self.wait(WARM_RETRY_S)
                continue
            self.wait(WARM_IDLE_S)
