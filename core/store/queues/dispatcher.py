"""The dispatcher (RocketMQ's ReputMessageService): follows the commit log and builds consume queues and index.

A message becomes visible to consumers when its consume-queue entry is written here, after each round has
committed the write ring into the segments. In normal running the
appender hands over the fields it already has (`CommitLog.pending`, in log order) so nothing is decoded twice;
after a crash, recovery feeds the same requests from a scan of the log. Either way `dispatched_offset` is the
commit-log offset below which every record is in its consume queue.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from core.store.errors import StoreError
from core.store.index.service import IndexService
from core.store.log.commit_log import CommitLog, DispatchRequest
from core.store.queues.consume_queue import ConsumeQueue
from core.store.queues.consume_queue_table import ConsumeQueueTable
from core.store.service_thread import ServiceThread

log = logging.getLogger(__name__)

# Poll interval while records flow (RocketMQ's reput sleeps 1 ms between rounds); after this many empty
# rounds (about 20 ms) the thread sleeps until an append wakes it, or IDLE_WAIT_S passes.
BUSY_POLL_S = 0.001
IDLE_ROUNDS_BEFORE_SLEEP = 20
IDLE_WAIT_S = 0.05
RETRY_WAIT_S = 1.0

DispatchListener = Callable[[set[tuple[str, int]]], None]


class Dispatcher(ServiceThread):
    def __init__(self, commit_log: CommitLog, queues: ConsumeQueueTable, index: IndexService | None) -> None:
        super().__init__("mqgate-dispatcher")
        self.commit_log = commit_log
        self.queues = queues
        # None once the index is built in a process of its own (core.store.index.process): `progress` then hears
        # how far the log is dispatched after each round.
        self.index = index
        self.progress: Callable[[int], None] | None = None
        self.dispatched_offset = 0
        self.index_failures = 0
        self.listeners: list[DispatchListener] = []
        self._progress = threading.Condition()
        self._backlog: list[DispatchRequest] = []

    def dispatch(self, requests: list[DispatchRequest]) -> set[tuple[str, int]]:
        """Write consume-queue and index entries; return the (topic, queue) pairs that got messages."""
        # The queues of this batch, by (topic, queue id): requests alternate between a few queues (a record's own
        # and its light queues), and a dictionary of this batch's is cheaper than the table's lookup each time.
        queues: dict[tuple[str, int], ConsumeQueue] = {}
        get_queue = self.queues.get_or_create
        build = self.index.build if self.index is not None else None
        end = self.dispatched_offset
        last_topic = ""
        last_queue_id = -1
        queue = None
        for topic, queue_id, queue_offset, offset, size, code, stamp, keys, unique_id in requests:
            if queue_id != last_queue_id or topic != last_topic:
                key = (topic, queue_id)
                queue = queues.get(key)
                if queue is None:
                    queue = queues[key] = get_queue(topic, queue_id)
                last_topic, last_queue_id = topic, queue_id
            assert queue is not None
            queue.put(queue_offset, offset, size, code)
            if build is not None and (keys or unique_id):
                try:
                    build(topic, keys, unique_id, offset, stamp)
                except (OSError, StoreError) as exc:
                    # The index only serves queries by key; a full disk must not stop consumers (RocketMQ
                    # skips the entry too). The gap is logged; later messages are indexed once space returns.
                    self.index_failures += 1
                    if self.index_failures == 1 or self.index_failures % 10_000 == 0:
                        log.error(
                            "index entry for commit-log offset %d not written (%d so far): %s",
                            offset,
                            self.index_failures,
                            exc,
                        )
            end = offset + size
        if end > self.dispatched_offset:
            self.dispatched_offset = end
        return set(queues)

    # --- the thread ---

    def run(self) -> None:
        idle_rounds = 0
        while not self.stopped:
            if self.run_once():
                idle_rounds = 0
                # While records flow, poll: waking this thread from every append costs the appender an
                # Event.set and a GIL hand-off per message (RocketMQ's reput also polls every 1 ms).
                time.sleep(BUSY_POLL_S)
                continue
            idle_rounds += 1
            if idle_rounds < IDLE_ROUNDS_BEFORE_SLEEP:
                time.sleep(BUSY_POLL_S)
                continue
            self.sleeping = True
            if not self.commit_log.pending:  # re-check after raising the flag: an append may have missed it
                self.wait(IDLE_WAIT_S)
            self.sleeping = False

    def run_once(self) -> bool:
        """Dispatch what was appended since the last round; True if there was anything."""
        batch, position = self.commit_log.take_pending()
        if self._backlog:
            batch = self._backlog + batch
        try:
            # The records reach their segments (from the write ring) before any reader can learn of them.
            self.commit_log.commit()
            touched = self.dispatch(batch) if batch else set()
        except Exception:
            # Dispatch is idempotent (positional entries, index skips what it has): keep the batch and try again.
            log.exception("commit or dispatch of %d records failed; retrying in %.0f s", len(batch), RETRY_WAIT_S)
            self._backlog = batch
            time.sleep(RETRY_WAIT_S)
            return True
        if not batch:
            if position > self.dispatched_offset:
                self.dispatched_offset = position  # only a segment filler since the last batch
                with self._progress:
                    self._progress.notify_all()
                if self.progress is not None:
                    self.progress(position)
            return False
        self._backlog = []
        if position > self.dispatched_offset:
            self.dispatched_offset = position
        with self._progress:
            self._progress.notify_all()
        if self.progress is not None:
            self.progress(self.dispatched_offset)
        for listener in self.listeners:
            try:
                listener(touched)
            except Exception:
                log.exception("dispatch listener %r failed", listener)
        return True

    def wait_dispatched(self, offset: int, timeout: float) -> bool:
        with self._progress:
            return self._progress.wait_for(lambda: self.dispatched_offset >= offset, timeout)

    def stop(self) -> None:
        super().stop()
        self.run_once()
