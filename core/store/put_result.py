"""What an append answers (RocketMQ's PutMessageResult): where the record went, and whether it is known to be on
disk."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from core.store.message_id import encode_offset_msg_id


class PutStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"


@dataclass(slots=True)
class PutResult:  # not frozen: one is built per append, and frozen dataclasses are 4x slower to build
    status: PutStatus
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    size: int
    store_timestamp: int
    store_host: tuple[str, int]

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
