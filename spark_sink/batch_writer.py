"""The bounded hand-over between a sink task on the event loop and the thread that runs Spark.

`put` appends a chunk (rows and the next offset of each queue they cover) and waits, on the event loop, while
`max_pending` rows are already waiting: memory stays bounded when Spark is slower than the producers (at most
`max_pending` rows plus one chunk). The writer thread takes every waiting chunk when `batch_size` rows are
waiting, when the oldest has waited `batch_interval_s`, or when a flush asks (so a batch holds `batch_size` rows
or more when Spark is behind, up to `max_pending` plus one chunk); it writes them with Spark
into the table's staging directory and commits them (table_commit.py). Spark calls block for seconds and would
stall every client of mqgate; in this thread they only hold the GIL while Python builds the job.

A chunk without rows carries offsets only (records the runtime dead-lettered): it is committed after every row
before it, like any chunk. `flush` has the waiting chunks written at once and resolves when they are committed.
A batch Spark fails to write is tried again `WRITE_ATTEMPTS` times (its staging directory emptied first); after
that the writer stops and every `put` and `flush` raises the error: the task fails, and once restarted resumes
from the table's manifest.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from connectors.api import QueueRef

log = logging.getLogger(__name__)

# A failed Spark write is usually a lost executor or a full disk; three tries with a pause ride out the first.
WRITE_ATTEMPTS = 3
RETRY_PAUSE_S = 2.0


@dataclass(slots=True)
class Chunk:
    rows: list[tuple[Any, ...]]
    offsets: dict[QueueRef, int]  # next offset per queue once these rows are in the table
    sequence: int


# Writes `rows` as the next batch and commits it with `offsets`; runs in the writer thread.
WriteBatch = Callable[[list[tuple[Any, ...]], dict[QueueRef, int]], None]


class BatchWriter:
    def __init__(
        self,
        write_batch: WriteBatch,
        batch_size: int,
        batch_interval_s: float,
        max_pending: int,
        name: str = "spark-sink",
        retryable: Callable[[BaseException], bool] = lambda error: True,
    ) -> None:
        self._write_batch = write_batch
        self._retryable = retryable
        self.batch_size = batch_size
        self.batch_interval_s = batch_interval_s
        self.max_pending = max_pending
        self._loop = asyncio.get_running_loop()
        self._condition = threading.Condition()
        self._chunks: deque[Chunk] = deque()
        self._pending_rows = 0
        self._oldest_at = 0.0  # monotonic time the oldest waiting chunk arrived
        self._flush_wanted = 0  # the highest sequence a flush waits for
        self._appended = 0  # sequence of the last chunk appended
        self._committed = 0  # sequence of the last chunk committed (loop side)
        self._closing = False
        self._error: BaseException | None = None
        self._space = asyncio.Event()
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    @property
    def error(self) -> BaseException | None:
        """Why the writer stopped (a batch it could not write), or None while it works."""
        return self._error

    @property
    def pending_rows(self) -> int:
        return self._pending_rows

    def _check(self) -> None:
        if self._error is not None:
            raise self._error
        if self._closing:
            raise RuntimeError("the Spark sink's writer is stopped")

    async def put(self, rows: list[tuple[Any, ...]], offsets: dict[QueueRef, int]) -> None:
        """Hand over rows (waits while the buffer is full)."""
        self._check()
        while self._pending_rows >= self.max_pending:
            self._space.clear()
            await self._space.wait()
            self._check()
        with self._condition:
            self._appended += 1
            first = not self._chunks
            if first:
                self._oldest_at = time.monotonic()
            self._chunks.append(Chunk(rows, offsets, self._appended))
            self._pending_rows += len(rows)
            if first or self._pending_rows >= self.batch_size:
                self._condition.notify()  # the first starts the batch.interval clock

    async def flush(self) -> None:
        """Commit every chunk handed over so far now; returns once they are in the table."""
        self._check()
        target = self._appended
        if self._committed >= target:
            return
        future: asyncio.Future[None] = self._loop.create_future()
        self._waiters.append((target, future))
        with self._condition:
            self._flush_wanted = max(self._flush_wanted, target)
            self._condition.notify()
        await future

    def close(self) -> None:
        """Stop the thread after the batch it is writing (blocking; rows not yet taken are dropped, and the runtime
        delivers them again from the table's offsets)."""
        with self._condition:
            self._closing = True
            self._condition.notify()
        self._thread.join()
        self._loop.call_soon_threadsafe(self._fail, RuntimeError("the Spark sink's writer is stopped"))

    # -- writer thread ------------------------------------------------------------------------------------

    def _take(self) -> list[Chunk] | None:
        with self._condition:
            while True:
                if self._closing:
                    return None
                if self._chunks:
                    waited = time.monotonic() - self._oldest_at
                    if (
                        self._pending_rows >= self.batch_size
                        or self._flush_wanted >= self._chunks[0].sequence
                        or waited >= self.batch_interval_s
                    ):
                        break
                    self._condition.wait(self.batch_interval_s - waited)
                else:
                    self._condition.wait()
            # Everything waiting: when Spark falls behind, batches grow up to the buffer's bound, and a Spark job's
            # fixed cost (a few tenths of a second) is paid fewer times.
            taken = list(self._chunks)
            self._chunks.clear()
            rows = sum(len(chunk.rows) for chunk in taken)
            self._pending_rows -= rows
            self._oldest_at = time.monotonic()
        self._loop.call_soon_threadsafe(self._space.set)
        return taken

    def _run(self) -> None:
        while (taken := self._take()) is not None:
            rows = [row for chunk in taken for row in chunk.rows]
            offsets: dict[QueueRef, int] = {}
            for chunk in taken:
                for queue, offset in chunk.offsets.items():
                    offsets[queue] = max(offset, offsets.get(queue, 0))
            for attempt in range(1, WRITE_ATTEMPTS + 1):
                try:
                    self._write_batch(rows, offsets)
                    break
                except Exception as exc:
                    if attempt == WRITE_ATTEMPTS or not self._retryable(exc):
                        log.error("Spark sink: writing %d rows failed %d times; stopping", len(rows), attempt)
                        self._loop.call_soon_threadsafe(self._fail, exc)
                        return
                    log.warning("Spark sink: writing %d rows failed (%s); trying again", len(rows), exc)
                    time.sleep(RETRY_PAUSE_S * attempt)
            self._loop.call_soon_threadsafe(self._done, taken[-1].sequence)

    # -- back on the loop -------------------------------------------------------------------------------------

    def _done(self, sequence: int) -> None:
        self._committed = sequence
        still = []
        for target, future in self._waiters:
            if target <= sequence:
                if not future.done():
                    future.set_result(None)
            else:
                still.append((target, future))
        self._waiters = still

    def _fail(self, error: BaseException) -> None:
        if self._error is None:
            self._error = error
        self._space.set()
        for _, future in self._waiters:
            if not future.done():
                future.set_exception(error)
        self._waiters = []
