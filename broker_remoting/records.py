"""Stored messages as the remoting protocol carries them: a pull reply's or a query's body, a check-back's body.

Each record names the broker's reachable address as its store host, not the store's own: the C++ client sends a
consumer's send-back to a pulled record's store host, and offset message ids are made of it. The broker's own
properties (core's INTERNAL_PROPERTIES) stay home; the body goes as stored (compressed ones with their flag, which
the clients undo)."""

from __future__ import annotations

from collections.abc import Iterable

from core import INTERNAL_PROPERTIES, StoredMessage
from remoting.message_codec import Host, MessageRecord, encode_record


def record_of(message: StoredMessage, store_host: Host) -> bytes:
    properties = message.properties
    if not INTERNAL_PROPERTIES.isdisjoint(properties):
        properties = {name: value for name, value in properties.items() if name not in INTERNAL_PROPERTIES}
    return encode_record(
        MessageRecord(
            topic=message.topic,
            body=message.body,
            queue_id=message.queue_id,
            flag=message.flag,
            queue_offset=message.queue_offset,
            commit_log_offset=message.commit_log_offset,
            sys_flag=message.sys_flag,
            born_timestamp=message.born_timestamp,
            born_host=message.born_host,
            store_timestamp=message.store_timestamp,
            store_host=store_host,
            reconsume_times=message.reconsume_times,
            prepared_transaction_offset=message.prepared_transaction_offset,
            properties=properties,
            body_crc=message.body_crc,
        )
    )


def records_body(messages: Iterable[StoredMessage], store_host: Host) -> bytes:
    return b"".join([record_of(message, store_host) for message in messages])
