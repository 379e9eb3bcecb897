"""A store cut back at a commit-log offset while it runs (automatic failover: a broker that rejoins its group drops
what it holds past the last point its log shares with the new master's, core.store.ha.role). The commit log cuts
itself (CommitLog.truncate); here the structures built from it follow: the consume queues lose their entries of the
records cut, and the index, whose files cannot lose single entries, loses its files that reach past the cut and
indexes the records below it that those files held again."""

from __future__ import annotations

from core.store.index.service import IndexService
from core.store.log.commit_log import CommitLog
from core.store.log.scan import ScanResult
from core.store.message import PROPERTY_KEYS, PROPERTY_UNIQ_KEY
from core.store.queues.consume_queue_table import ConsumeQueueTable


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
