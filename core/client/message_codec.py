"""What clients do to a message on its way in and out: build the store's Message (properties, compression) and
undo the compression for consumers. RocketMQ clients compress bodies over 4 KiB with zlib and flag it."""

from __future__ import annotations

import enum
import socket
import time
import zlib
from collections.abc import Mapping
from dataclasses import replace

from core.store.message import (
    KEY_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_TAGS,
    SYSFLAG_COMPRESSED,
    Message,
    StoredMessage,
)

# RocketMQ's compressMsgBodyOverHowmuch.
COMPRESS_OVER = 4 * 1024
COMPRESS_LEVEL = 5


class MessageModel(enum.Enum):
    CLUSTERING = "CLUSTERING"  # each message to one member of the group; offsets kept by the broker
    BROADCASTING = "BROADCASTING"  # each message to every member; offsets kept by each client


class ConsumeFromWhere(enum.Enum):
    """Where a group with no committed offset starts (RocketMQ's ConsumeFromWhere)."""

    LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


def local_host() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"


def build_message(
    topic: str,
    body: bytes,
    *,
    tags: str | None = None,
    keys: str | list[str] | None = None,
    properties: Mapping[str, str] | None = None,
    queue_id: int = 0,
    born_host: str = "127.0.0.1",
    compress_over: int = COMPRESS_OVER,
) -> Message:
    props = dict(properties or {})
    if tags:
        props[PROPERTY_TAGS] = tags
    if keys:
        props[PROPERTY_KEYS] = keys if isinstance(keys, str) else KEY_SEPARATOR.join(keys)
    sys_flag = 0
    if len(body) > compress_over:
        compressed = zlib.compress(body, COMPRESS_LEVEL)
        if len(compressed) < len(body):  # incompressible bodies travel as they are
            body, sys_flag = compressed, SYSFLAG_COMPRESSED
    return Message(
        topic=topic,
        body=body,
        queue_id=queue_id,
        properties=props,
        sys_flag=sys_flag,
        born_timestamp=time.time_ns() // 1_000_000,
        born_host=(born_host, 0),
    )


def decode_for_consumer(message: StoredMessage) -> StoredMessage:
    """The message as the producer sent it: decompressed when it was compressed on the way in."""
    if message.sys_flag & SYSFLAG_COMPRESSED:
        return replace(message, body=zlib.decompress(message.body), sys_flag=message.sys_flag & ~SYSFLAG_COMPRESSED)
    return message
