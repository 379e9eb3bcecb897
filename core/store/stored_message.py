"""A message read back from the commit log (`StoredMessage`, RocketMQ's MessageExt); core.store.message exports it.

Compiled (pyproject.toml [tool.mqgate] compiled), so that it is a native class: every message read builds one and
every consumer reads its fields, and the decoder (core.store.log.record_codec) and the consumers are compiled too.
Its fields are typed, which is safe because the store alone builds it, from a checked record. (`Message`, which
senders build, stays interpreted: a field of the wrong type must reach the store's own refusal.)
"""

from __future__ import annotations

from dataclasses import dataclass

from core.store.log.property_codec import (
    MULTI_DISPATCH_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_MULTI_DISPATCH,
    PROPERTY_TAGS,
    PROPERTY_UNIQ_KEY,
    public_properties,
    split_keys,
)


@dataclass(slots=True, init=False)
class StoredMessage:
    """Treat as read-only (readers of a light queue set its queue_offset); not frozen because one is built per
    message read. Its __init__ is written out: the one the dataclass decorator generates would run interpreted
    (core.store.put_result.PutResult). The decorator still gives __eq__ and __repr__."""

    topic: str
    body: bytes
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    store_size: int
    body_crc: int
    flag: int
    sys_flag: int
    born_timestamp: int
    born_host: tuple[str, int]
    store_timestamp: int
    store_host: tuple[str, int]
    reconsume_times: int
    prepared_transaction_offset: int
    properties: dict[str, str]

    def __init__(
        self,
        topic: str,
        body: bytes,
        queue_id: int,
        queue_offset: int,
        commit_log_offset: int,
        store_size: int,
        body_crc: int,
        flag: int,
        sys_flag: int,
        born_timestamp: int,
        born_host: tuple[str, int],
        store_timestamp: int,
        store_host: tuple[str, int],
        reconsume_times: int,
        prepared_transaction_offset: int,
        properties: dict[str, str],
    ) -> None:
        self.topic = topic
        self.body = body
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.commit_log_offset = commit_log_offset
        self.store_size = store_size
        self.body_crc = body_crc
        self.flag = flag
        self.sys_flag = sys_flag
        self.born_timestamp = born_timestamp
        self.born_host = born_host
        self.store_timestamp = store_timestamp
        self.store_host = store_host
        self.reconsume_times = reconsume_times
        self.prepared_transaction_offset = prepared_transaction_offset
        self.properties = properties

    # The well-known properties, as core.store.message.WellKnownProperties gives them for Message.
    @property
    def tags(self) -> str | None:
        return self.properties.get(PROPERTY_TAGS)

    @property
    def keys(self) -> list[str]:
        return split_keys(self.properties.get(PROPERTY_KEYS))

    @property
    def unique_id(self) -> str | None:
        return self.properties.get(PROPERTY_UNIQ_KEY)

    @property
    def public_properties(self) -> dict[str, str]:
        """core.store.log.property_codec.public_properties of the message's properties."""
        return public_properties(self.properties)

    @property
    def light_queues(self) -> list[str]:
        """The light queues the message was dispatched to as well (its PROPERTY_MULTI_DISPATCH property)."""
        names = self.properties.get(PROPERTY_MULTI_DISPATCH)
        return names.split(MULTI_DISPATCH_SEPARATOR) if names else []

    @property
    def offset_msg_id(self) -> str:
        # Imported here: core.store.message_id imports core.store.message, which imports this module.
        from core.store.message_id import encode_offset_msg_id

        return encode_offset_msg_id(self.store_host, self.commit_log_offset)
