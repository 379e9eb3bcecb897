"""Message body compression, as RocketMQ clients do it: bodies over 4 KiB are zlib-compressed by the producer and
flagged in the record's sys_flag; whoever hands a message to a consumer undoes it."""

from __future__ import annotations

import zlib
from dataclasses import replace

from core.store.message import SYSFLAG_COMPRESSED, StoredMessage

# RocketMQ's compressMsgBodyOverHowmuch, and the zlib level its clients use.
COMPRESS_OVER = 4 * 1024
COMPRESS_LEVEL = 5


def compress_body(body: bytes, over: int = COMPRESS_OVER) -> tuple[bytes, int]:
    """(body to store, sys_flag bits): compressed only when that makes it smaller."""
    if len(body) > over:
        compressed = zlib.compress(body, COMPRESS_LEVEL)
        if len(compressed) < len(body):
            return compressed, SYSFLAG_COMPRESSED
    return body, 0


def decode_for_consumer(message: StoredMessage) -> StoredMessage:
    """The message as the producer sent it: decompressed when it was compressed on the way in."""
    if message.sys_flag & SYSFLAG_COMPRESSED:
        return replace(message, body=zlib.decompress(message.body), sys_flag=message.sys_flag & ~SYSFLAG_COMPRESSED)
    return message
