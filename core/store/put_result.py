"""What an append answers (RocketMQ's PutMessageResult): where the record went, and whether it is known to be on
disk."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from core.store.message_id import encode_offset_msg_id


class PutStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    # SYNC_MASTER (core.store.ha): no slave held the record within slave_timeout_ms, or none could (no slave, or
    # one too far behind). The record is in the master's log either way.
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(slots=True, init=False)
class PutResult:
    """Not frozen (one is built per append, and frozen dataclasses are 4x slower to build), and its __init__ is
    written out: mypyc compiles a class's own methods, while the ones the dataclass decorator generates run
    interpreted (0.29 against 0.07 us a build). The decorator still gives __eq__ and __repr__."""

    status: PutStatus
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    size: int
    store_timestamp: int
    store_host: tuple[str, int]

    def __init__(
        self,
        status: PutStatus,
        topic: str,
        queue_id: int,
        queue_offset: int,
        commit_log_offset: int,
        size: int,
        store_timestamp: int,
        store_host: tuple[str, int],
    ) -> None:
        self.status = status
        self.topic = topic
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.commit_log_offset = commit_log_offset
        self.size = size
        self.store_timestamp = store_timestamp
        self.store_host = store_host

    @property
    def end_offset(self) -> int:
        return self.commit_log_offset + self.size

    @property
    def offset_msg_id(self) -> str:
        return encode_offset_msg_id(self.store_host, self.commit_log_offset)

    def with_status(self, status: PutStatus) -> PutResult:
        return PutResult(
            status,
            self.topic,
            self.queue_id,
            self.queue_offset,
            self.commit_log_offset,
            self.size,
            self.store_timestamp,
            self.store_host,
        )
