"""What clients do to a message on its way in: build the store's Message (properties, compression, message
group). Consumers get it back through core.compression.decode_for_consumer."""

from __future__ import annotations

import enum
import socket
import time
from collections.abc import Mapping

from core.compression import COMPRESS_OVER, compress_body
from core.store.message import KEY_SEPARATOR, PROPERTY_KEYS, PROPERTY_MESSAGE_GROUP, PROPERTY_TAGS, Message


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
    message_group: str | None = None,
) -> Message:
    props = dict(properties or {})
    if tags:
        props[PROPERTY_TAGS] = tags
    if keys:
        props[PROPERTY_KEYS] = keys if isinstance(keys, str) else KEY_SEPARATOR.join(keys)
    if message_group:
        props[PROPERTY_MESSAGE_GROUP] = message_group
    sys_flag = 0
    if len(body) > compress_over:  # tested here too: most bodies are small, and compress_body is interpreted
        body, sys_flag = compress_body(body, compress_over)
    # Positional, in Message's field order (flag 0): keyword arguments cost the interpreted dataclass's __init__
    # a name match each, on every message built.
    return Message(topic, body, queue_id, props, 0, sys_flag, time.time_ns() // 1_000_000, (born_host, 0))
