"""A stored record as the remoting protocol carries it (remoting.message_codec's MessageRecord) as core's
StoredMessage: what a pull, a pop and a check-back give the caller, its body inflated (the record's compressed flag
cleared), as core's consumers give messages. The record's store host is the broker's address for clients; its size
in the store is not carried (0)."""

from __future__ import annotations

from core import StoredMessage
from remoting.message_codec import COMPRESSED_FLAG, MessageRecord, decode_records


def stored_message(record: MessageRecord, properties: dict[str, str] | None = None) -> StoredMessage:
    return StoredMessage(
        record.topic, record.body, record.queue_id, record.queue_offset, record.commit_log_offset, 0,
        record.body_crc or 0, record.flag, record.sys_flag & ~COMPRESSED_FLAG, record.born_timestamp,
        record.born_host, record.store_timestamp, record.store_host, record.reconsume_times,
        record.prepared_transaction_offset, record.properties if properties is None else properties,
    )  # fmt: skip


def stored_messages(body: bytes) -> list[StoredMessage]:
    return [stored_message(record) for record in decode_records(body)]
