"""A commit log read back, rather than appended to: a record's dispatch requests replayed from the log (recovery's
scan, a slave's copy of its master's log), and the log's raw bytes (a slave's tail, compared with its master's)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.store.message import (
    MULTI_DISPATCH_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_MULTI_DISPATCH,
    PROPERTY_UNIQ_KEY,
    StoredMessage,
    entry_code,
)

if TYPE_CHECKING:
    from core.store.log.commit_log import CommitLog, DispatchRequest


def replay(commit_log: CommitLog, message: StoredMessage, out: list[DispatchRequest]) -> None:
    """The dispatch requests of a record read back: its queue entry at the queue offset it carries, and its light
    queues' at their next offsets (the records do not carry those: the replay assigns them in log order, as the
    appends did). Callers that run beside appends hold the commit log's lock."""
    properties = message.properties
    code = entry_code(properties)
    offset = message.commit_log_offset
    size = message.store_size
    stamp = message.store_timestamp
    out.append(
        (
            message.topic,
            message.queue_id,
            message.queue_offset,
            offset,
            size,
            code,
            stamp,
            properties.get(PROPERTY_KEYS),
            properties.get(PROPERTY_UNIQ_KEY),
        )
    )
    light = properties.get(PROPERTY_MULTI_DISPATCH)
    if light:
        commit_log.add_light_entries(
            tuple(dict.fromkeys(light.split(MULTI_DISPATCH_SEPARATOR))), offset, size, code, stamp, out
        )


def read_bytes(commit_log: CommitLog, start: int, end: int) -> bytes:
    """The log's bytes from `start` to `end` (committed first), across segments. Raises LookupError outside the
    log."""
    if not commit_log.min_offset <= start <= end <= commit_log.write_pos:
        raise LookupError(
            f"commit-log bytes {start}..{end} are outside [{commit_log.min_offset}, {commit_log.write_pos}]"
        )
    if end > commit_log.committed_pos:
        commit_log.commit()
    parts = []
    pos = start
    while pos < end:
        mapped = commit_log.files.find(pos)
        if mapped is None:
            raise LookupError(f"commit-log offset {pos}: no segment holds it")
        stop = min(end, mapped.end)
        parts.append(bytes(mapped.view[pos - mapped.base : stop - mapped.base]))
        pos = stop
    return b"".join(parts)
