"""Reading the messages of a queue (RocketMQ's getMessage, behind MessageStore.get_messages): its consume queue
says where they are in the commit log, the log holds them. Also what a read answers (GetStatus, GetResult).

A read looks at entries from the offset asked for, in order, and stops at `max_count` messages, at about
`max_bytes` (always one message at least), at the end of the queue, or after MAX_FILTERED_ENTRIES entries. It
skips holes (size 0: a record lost or skipped as corrupt before it was dispatched), entries whose tag code the
tag filter refuses (without reading the log), messages the message filter refuses, and records removed by
retention since the entry was read. A record that fails its checks, or that is not the message its entry names,
is logged and reported in GetResult.corrupt, never handed out. `next_begin_offset` is where the next read goes on.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from core.store.errors import CorruptRecordError
from core.store.log.commit_log import CommitLog
from core.store.message import StoredMessage, is_light_queue
from core.store.queues.consume_queue_table import ConsumeQueueTable

log = logging.getLogger(__name__)

# A pull stops after looking at this many consume-queue entries that its filter rejects
# (RocketMQ's maxFilterMessageCount is 16,000), so a selective filter cannot make one pull scan forever.
MAX_FILTERED_ENTRIES = 16_000


class GetStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"


@dataclass(slots=True, frozen=True)
class GetResult:
    status: GetStatus
    messages: list[StoredMessage]
    next_begin_offset: int
    min_offset: int
    max_offset: int
    # Records that failed their checks: (queue offset, error). They are skipped, never returned.
    corrupt: list[tuple[int, CorruptRecordError]] = field(default_factory=list)


class QueueReader:
    """Reads queues' messages from one store's commit log through its consume queues."""

    __slots__ = ("_commit_log", "_commit_log_dir", "_queues")

    def __init__(self, commit_log: CommitLog, queues: ConsumeQueueTable, commit_log_dir: Path) -> None:
        self._commit_log = commit_log
        self._queues = queues
        self._commit_log_dir = str(commit_log_dir)  # named in the error of a record its entry does not match

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int,
        tag_filter: Callable[[int], bool] | None,
        message_filter: Callable[[StoredMessage], bool] | None,
        max_bytes: int,
    ) -> GetResult:
        """MessageStore.get_messages, which gives the defaults."""
        queue = self._queues.get(topic, queue_id)
        if queue is None:
            return GetResult(GetStatus.NO_MATCHED_LOGIC_QUEUE, [], 0, 0, 0)
        low, high = queue.min_offset, queue.max_offset
        if high == 0:
            return GetResult(GetStatus.NO_MESSAGE_IN_QUEUE, [], 0, low, high)
        if offset < low:
            return GetResult(GetStatus.OFFSET_TOO_SMALL, [], low, low, high)
        if offset == high:
            return GetResult(GetStatus.OFFSET_OVERFLOW_ONE, [], offset, low, high)
        if offset > high:
            return GetResult(GetStatus.OFFSET_OVERFLOW_BADLY, [], high, low, high)
        light = is_light_queue(topic)
        messages: list[StoredMessage] = []
        corrupt: list[tuple[int, CorruptRecordError]] = []
        scanned = 0
        total_bytes = 0
        next_offset = offset
        while next_offset < high and len(messages) < max_count and scanned < MAX_FILTERED_ENTRIES:
            entries = queue.entries(next_offset, min(max_count * 4, high - next_offset))
            if not entries:
                break
            for commit_log_offset, size, code in entries:
                if len(messages) >= max_count or (total_bytes + size > max_bytes and messages):
                    break
                queue_offset = next_offset
                next_offset += 1
                scanned += 1
                if size == 0:
                    continue  # a hole: the record was lost or skipped as corrupt before it was dispatched
                if tag_filter is not None and not tag_filter(code):
                    continue
                try:
                    message = self._commit_log.read_message(commit_log_offset)
                except CorruptRecordError as exc:
                    log.error("queue %s/%d offset %d: %s", topic, queue_id, queue_offset, exc)
                    corrupt.append((queue_offset, exc))
                    continue
                except LookupError:
                    continue  # removed by retention since the entry was read
                if (
                    message.queue_offset != queue_offset or message.queue_id != queue_id or message.topic != topic
                ) and not (light and topic in message.light_queues):
                    # The entry and the record disagree: never hand a consumer another queue's message.
                    mismatch = CorruptRecordError(
                        self._commit_log_dir,
                        commit_log_offset,
                        commit_log_offset,
                        f"consume queue {topic}/{queue_id} offset {queue_offset} points at a record of"
                        f" {message.topic}/{message.queue_id} offset {message.queue_offset}",
                    )
                    log.error("%s", mismatch)
                    corrupt.append((queue_offset, mismatch))
                    continue
                if message_filter is not None and not message_filter(message):
                    continue
                if light:
                    message.queue_offset = queue_offset  # its position in the light queue read, not its own queue
                messages.append(message)
                total_bytes += size
            else:
                continue
            break
        status = GetStatus.FOUND if messages else GetStatus.NO_MATCHED_MESSAGE
        return GetResult(status, messages, next_offset, low, high, corrupt)
