"""What the transaction service (core.transactions.service) keeps across a restart, and how it gets it back.

- Op records: TRANS_OP_HALF_TOPIC, queue 0, tag "d", the body the decided halves' half-queue offsets in decimal,
  separated by commas (RocketMQ's TransactionalMessageUtil: REMOVE_TAG and OFFSET_SEPARATOR; ours hold one).
- Offsets: the committed offsets of TRANS_CHECK_GROUP in the half queue and the op queue (consumerOffset.json,
  RocketMQ's CID_SYS_RMQ_TRANS), as TransactionLedger.half_offset and op_offset define them.
- Check counts: `transactionCheck.json`, {"checkTimes": {"<half queue offset>": <checks>, ...}}, for undecided
  halves checked at least once, written before each round of checks goes out (write_json: atomic, the previous
  version in .bak).

`rebuild_ledger` reads op records from the op offset (which halves past the half offset are decided) and half-queue
entries from the half offset (the others are undecided; their first check time is the entry's tag code, so no half
record is read). Every undecided half it finds is in doubt: the run that stored it may have crashed after storing
its copy and before its op record.
"""

from __future__ import annotations

import logging
from pathlib import Path

from core.errors import ConfigFileError
from core.store.errors import CorruptRecordError
from core.store.message import PROPERTY_TAGS, Message
from core.store.message_store import MessageStore
from core.system_topics import TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC
from core.tables.json_file import read_json, write_json
from core.transactions.ledger import Half, TransactionLedger

log = logging.getLogger(__name__)

TRANSACTION_CHECK_FILE = "transactionCheck.json"
OP_REMOVE_TAG = "d"
OP_OFFSET_SEPARATOR = ","
# Queue entries read per call while rebuilding.
REBUILD_BATCH = 4096


def op_record(half_queue_offset: int, born_timestamp: int) -> Message:
    """The op record saying the half at `half_queue_offset` is decided."""
    return Message(
        topic=TRANS_OP_HALF_TOPIC,
        body=str(half_queue_offset).encode(),
        queue_id=0,
        properties={PROPERTY_TAGS: OP_REMOVE_TAG},
        born_timestamp=born_timestamp,
    )


def read_op_record(store: MessageStore, commit_log_offset: int) -> tuple[int, ...]:
    """The half-queue offsets the op record at `commit_log_offset` names; none (logged) for one that cannot be
    read or is not an op record."""
    try:
        record = store.read_message(commit_log_offset)
    except (LookupError, CorruptRecordError) as exc:
        log.error("transaction: the op record at commit-log offset %d cannot be read: %s", commit_log_offset, exc)
        return ()
    text = record.body.decode(errors="replace")
    parts = text.split(OP_OFFSET_SEPARATOR)
    if record.tags != OP_REMOVE_TAG or not all(part.isascii() and part.isdigit() for part in parts):
        log.error("transaction: op record %r with tag %r ignored", text[:80], record.tags)
        return ()
    return tuple(int(part) for part in parts)


def rebuild_ledger(
    store: MessageStore, interval_ms: int, half_offset: int, op_offset: int, check_times: dict[int, int]
) -> TransactionLedger:
    """The ledger as the half and op queues say from the committed `half_offset` and `op_offset` (-1: none). The
    store must have dispatched everything it holds."""
    half_end = store.max_offset(TRANS_HALF_TOPIC, 0)
    op_end = store.max_offset(TRANS_OP_HALF_TOPIC, 0)
    # An offset past the queue's end: a tail lost in a crash after the offset was persisted.
    half_offset = max(min(half_offset, half_end), store.min_offset(TRANS_HALF_TOPIC, 0), 0)
    op_offset = max(min(op_offset, op_end), store.min_offset(TRANS_OP_HALF_TOPIC, 0), 0)
    ledger = TransactionLedger(interval_ms, half_offset, op_offset)
    decided: set[int] = set()
    offset = op_offset
    while offset < op_end:
        entries = store.queue_entries(TRANS_OP_HALF_TOPIC, 0, offset, REBUILD_BATCH)
        if not entries:
            break
        for commit_log_offset, size, _ in entries:
            halves = read_op_record(store, commit_log_offset) if size else ()
            decided.update(halves)
            ledger.decided(halves, offset)
            offset += 1
    ledger.op_queue_ends_at(op_end)
    offset = half_offset
    while offset < half_end:
        entries = store.queue_entries(TRANS_HALF_TOPIC, 0, offset, REBUILD_BATCH)
        if not entries:
            break
        for commit_log_offset, size, first_check_ms in entries:
            if size and offset not in decided:
                checks = check_times.get(offset, 0)
                ledger.add(Half(offset, commit_log_offset, first_check_ms, checks, in_doubt=True))
            offset += 1
    ledger.half_queue_ends_at(half_end)
    log.info(
        "transaction: %d half messages undecided after a start (half offset %d of %d, op offset %d of %d)",
        ledger.undecided_count(),
        ledger.half_offset,
        half_end,
        ledger.op_offset,
        op_end,
    )
    return ledger


def load_check_times(path: Path) -> dict[int, int]:
    """The check counts in `path` (none when there is no file); ConfigFileError for a file that is not one."""
    data = read_json(path)
    if data is None:
        return {}
    table = data.get("checkTimes") if isinstance(data, dict) else None
    if not isinstance(table, dict) or not all(
        offset.isascii() and offset.isdigit() and isinstance(times, int) and not isinstance(times, bool) and times >= 0
        for offset, times in table.items()
    ):
        raise ConfigFileError(
            path, 'must hold {"checkTimes": {"<half queue offset>": <checks>, ...}}', hint="restore it from .bak"
        )
    return {int(offset): times for offset, times in table.items()}


def persist_check_times(path: Path, times: dict[int, int], durable: bool) -> None:
    write_json(path, {"checkTimes": {str(offset): checks for offset, checks in sorted(times.items())}}, durable)
