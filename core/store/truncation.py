"""A store cut back at a commit-log offset while it runs (automatic failover: a broker that rejoins its group drops
what it holds past the last point its log shares with the new master's, core.store.ha.role): the commit log, then
the structures built from it: the consume queues lose their entries of the
records cut, and the index, whose files cannot lose single entries, loses its files that reach past the cut and
indexes the records below it that those files held again."""

from __future__ import annotations

import os

from core.store.index.service import IndexService
from core.store.log.commit_log import CommitLog
from core.store.log.scan import ScanResult
from core.store.message import PROPERTY_KEYS, PROPERTY_UNIQ_KEY
from core.store.queues.consume_queue_table import ConsumeQueueTable

# Zeros written over a cut tail, a piece at a time.
_ZEROS = memoryview(bytes(1024 * 1024))


def truncate_log(commit_log: CommitLog, offset: int) -> int:
    """Cut the log at `offset`, a record boundary at or below the write position: the bytes past it are zeroed in
    their segment and in the write ring and synced, later segments deleted, so neither a read nor a recovery after
    a crash finds them again. Nothing may be appended meanwhile, and the dispatcher must have taken every record.
    Returns the number of bytes cut; ValueError for an offset below the log's start."""
    with commit_log.lock:
        end = commit_log.write_pos
        if offset >= end:
            return 0
        if offset < commit_log.min_offset:
            raise ValueError(f"commit-log offset {offset} is below this log's start {commit_log.min_offset}")
        commit_log.commit()
        with commit_log.commit_lock:
            mapped = commit_log.files.find(offset)
            if mapped is not None and not mapped.closed:
                fd = mapped.write_fd()
                for position in range(offset, min(end, mapped.end), len(_ZEROS)):
                    piece = min(min(end, mapped.end) - position, len(_ZEROS))
                    os.pwrite(fd, _ZEROS[:piece], position - mapped.base)
                os.fdatasync(fd)
            ring = commit_log.ring
            for position in range(max(offset, end - ring.size), end, len(_ZEROS)):
                ring.put(position, _ZEROS[: min(end - position, len(_ZEROS))])
            commit_log.set_end(offset)  # later segments deleted, the ring committed at the cut
            commit_log.pending = [request for request in commit_log.pending if request[3] < offset]
    return end - offset


def truncate_queues(commit_log: CommitLog, queues: ConsumeQueueTable, offset: int) -> int:
    """Drop the queue entries of records at or past `offset`; the next offset of each queue follows. Returns how
    many entries went."""
    dropped = sum(queue.truncate_from_physical(offset) for queue in queues.all())
    with commit_log.lock:
        commit_log.queue_offsets = {(queue.topic, queue.queue_id): queue.max_offset for queue in queues.all()}
    return dropped


def index_again(index: IndexService, commit_log: CommitLog, start: int, end: int) -> None:
    """Index the records from `start` to `end` again (IndexService.drop_from said where to start)."""
    scanned = ScanResult(end=start, records=0, corrupt=[], truncated=0)
    for message in commit_log.scan(start, scanned):
        if message.commit_log_offset >= end:
            break
        properties = message.properties
        index.build(
            message.topic,
            properties.get(PROPERTY_KEYS),
            properties.get(PROPERTY_UNIQ_KEY),
            message.commit_log_offset,
            message.store_timestamp,
        )
    index.flush()
