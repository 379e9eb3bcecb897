"""Opening the store after a stop (MessageStore.open): where the commit log ends, and what the consume queues and
index must be brought up to.

After a clean stop (no `abort` file) the checkpoint holds the exact end of the log; the store opens without
reading the log once nothing is found past that end. After a crash recovery scans the log from the oldest
position the checkpoint and the index files vouch for (the lowest of the log flushed, the records dispatched and
the records indexed), checking every record's CRC; skips and reports corrupt records in the middle, cuts a torn
tail, re-dispatches what the consume queues and index may lack, and drops consume-queue entries that point past
the end of the log. Light-queue entries are not in the records' own fields, so those from the scan's start on
are dropped and assigned again by the replay, in log order, as the appends did. Either way every queue loses its
entries below the log's start, and the commit log learns each queue's next offset.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.store.checkpoint import Checkpoint
from core.store.index.service import IndexService
from core.store.log.commit_log import CommitLog, DispatchRequest
from core.store.log.record_codec import HEADER_SIZE
from core.store.log.replay import replay
from core.store.log.scan import ScanResult
from core.store.message import is_light_queue
from core.store.queues.consume_queue_table import ConsumeQueueTable
from core.store.queues.dispatcher import Dispatcher

log = logging.getLogger(__name__)

# Records re-dispatched per batch during recovery.
RECOVERY_BATCH = 10_000


@dataclass(slots=True, frozen=True)
class RecoveryReport:
    clean: bool
    start: int
    end: int
    records_scanned: int
    truncated_bytes: int
    corrupt: list[tuple[str, int, int]]
    consume_queue_entries_dropped: int
    seconds: float

    def summary(self) -> str:
        """One line for a log: how the store opened, and what a scan found."""
        if self.clean:
            return f"clean, log {self.start}..{self.end}, {self.seconds:.2f} s"
        return (
            f"scanned {self.records_scanned} records of log {self.start}..{self.end} in {self.seconds:.2f} s,"
            f" {self.truncated_bytes} bytes of torn tail cut, {len(self.corrupt)} corrupt regions skipped,"
            f" {self.consume_queue_entries_dropped} consume-queue entries dropped"
        )


class StoreRecovery:
    """Recovers one store's log, consume queues and index, once they are loaded, from its checkpoint. The store's
    `save_checkpoint` writes the checkpoint after a scan, so that a crash during the next run scans from there."""

    def __init__(
        self,
        store_dir: Path,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexService,
        dispatcher: Dispatcher,
        save_checkpoint: Callable[[], Checkpoint],
    ) -> None:
        self._store_dir = store_dir
        self._commit_log = commit_log
        self._queues = queues
        self._index = index
        self._dispatcher = dispatcher
        self._save_checkpoint = save_checkpoint

    def run(self, checkpoint: Checkpoint, crashed: bool, index_from: int) -> RecoveryReport:
        """Recover after a stop, clean unless `crashed` (an `abort` file was left) or the log goes on past the
        checkpoint; `index_from` is where the index lacks records (IndexService.load). The report's `seconds` is
        left at 0 for the caller, who times the whole open."""
        if not crashed and self._clean_end(checkpoint):
            return self._recover_clean(checkpoint)
        return self._recover_scan(checkpoint, index_from)

    def _clean_end(self, checkpoint: Checkpoint) -> bool:
        """After a clean stop the checkpoint holds the exact end; check that nothing follows it."""
        end = checkpoint.commit_log_flushed
        if checkpoint.dispatched != end:
            return False
        files = self._commit_log.files
        if not files.files:
            return end == 0
        mapped = files.find(end)
        if mapped is None:
            return end == files.files[-1].end and end > 0
        local = end - mapped.base
        return mapped.mm[local : local + HEADER_SIZE].count(0) == min(HEADER_SIZE, mapped.size - local)

    def _recover_clean(self, checkpoint: Checkpoint) -> RecoveryReport:
        end = checkpoint.commit_log_flushed
        self._commit_log.set_end(end)
        self._commit_log.flushed_pos = end
        self._finish_recovery(end)
        return RecoveryReport(
            clean=True,
            start=end,
            end=end,
            records_scanned=0,
            truncated_bytes=0,
            corrupt=[],
            consume_queue_entries_dropped=0,
            seconds=0.0,
        )

    def _recover_scan(self, checkpoint: Checkpoint, index_from: int) -> RecoveryReport:
        start = min(checkpoint.commit_log_flushed, checkpoint.dispatched, index_from)
        result = ScanResult(end=start, records=0, corrupt=[], truncated=0)
        batch: list[DispatchRequest] = []
        self._dispatcher.dispatched_offset = start
        # Light-queue offsets are not in the records: drop the entries of records from `start` on and let the
        # replay below assign them again, in the same log order as the appends did.
        light_offsets = {}
        for queue in self._queues.all():
            if is_light_queue(queue.topic):
                queue.truncate_from_physical(start)
                light_offsets[(queue.topic, queue.queue_id)] = queue.max_offset
        self._commit_log.queue_offsets = light_offsets
        for message in self._commit_log.scan(start, result):
            replay(self._commit_log, message, batch)
            if len(batch) >= RECOVERY_BATCH:
                self._dispatcher.dispatch(batch)
                batch = []
        self._dispatcher.dispatch(batch)
        end = result.end
        self._commit_log.set_end(end)
        self._commit_log.flushed_pos = min(checkpoint.commit_log_flushed, end)
        dropped = sum(queue.truncate_from_physical(end) for queue in self._queues.all())
        self._finish_recovery(end)
        self._commit_log.flush()
        for queue in self._queues.all():
            queue.flush()
        self._index.flush()
        self._save_checkpoint()
        if result.truncated or result.corrupt or dropped:
            log.warning(
                "recovered %s: end %d, torn tail %d bytes, %d corrupt regions, %d queue entries dropped",
                self._store_dir,
                end,
                result.truncated,
                len(result.corrupt),
                dropped,
            )
        return RecoveryReport(
            clean=False,
            start=start,
            end=end,
            records_scanned=result.records,
            truncated_bytes=result.truncated,
            corrupt=result.corrupt,
            consume_queue_entries_dropped=dropped,
            seconds=0.0,
        )

    def _finish_recovery(self, end: int) -> None:
        self._dispatcher.dispatched_offset = end
        minimum = self._commit_log.min_offset
        offsets = {}
        for queue in self._queues.all():
            queue.delete_below_physical(minimum)
            offsets[(queue.topic, queue.queue_id)] = queue.max_offset
        self._commit_log.queue_offsets = offsets
