"""Messages as RocketMQ 4's remoting protocol carries them (RocketMQ's MessageDecoder), without I/O.

A stored message, as a pull reply's body holds them one after another (and a check-back's body holds one),
big-endian:

    total size        int32       this record, these 4 bytes included
    magic             int32       MESSAGE_MAGIC (RocketMQ's MESSAGE_MAGIC_CODE, V1)
    body CRC          int32
    queue id          int32
    flag              int32       the producer's
    queue offset      int64
    commit-log offset int64
    sys flag          int32       compressed (bit 0), transaction type (bits 2-3), born / store host IPv6 (4, 5)
    born timestamp    int64
    born host         4 bytes IPv4 (16 with the IPv6 flag), then int32 port
    store timestamp   int64
    store host        4 bytes IPv4 (16 with the IPv6 flag), then int32 port
    reconsume times   int32
    prepared transaction offset int64
    body              int32 length, bytes
    topic             int8 length (signed: a topic of 128 bytes or more does not fit), bytes
    properties        int16 length, UTF-8 `name \\x01 value \\x02` repeated

A batch a producer sends (SEND_BATCH_MESSAGE's body) holds messages one after another, each: int32 total size,
int32 magic (0), int32 body CRC (0), int32 flag, int32 body length and body, int16 properties length and
properties. The offset message id of a stored message is its store host's IPv4 address and port and its commit-log
offset, as 32 hex digits (MessageDecoder.createMessageId).
"""

from __future__ import annotations

import functools
import ipaddress
import struct
import zlib
from dataclasses import dataclass, field

from remoting.errors import RemotingError

MESSAGE_MAGIC = -626843481  # 0xDAA320A7
COMPRESSED_FLAG = 0x1
BORNHOST_V6_FLAG = 0x1 << 4
STOREHOST_V6_FLAG = 0x1 << 5
NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
# A topic's length is a signed byte in the record (the C++ client reads it so).
MAX_TOPIC_BYTES = 127
MAX_PROPERTIES_BYTES = 32767

_HEAD = struct.Struct(">iiiiiqqiq")  # total size .. born timestamp
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_I16 = struct.Struct(">h")
_BATCH_HEAD = struct.Struct(">iiiii")  # total size, magic, body CRC, flag, body length


class MessageLayoutError(RemotingError, ValueError):
    """A message that RocketMQ's layout cannot carry, or bytes that are not one."""


Host = tuple[str, int]  # (IP address, port)


@dataclass(slots=True)
class MessageRecord:
    topic: str
    body: bytes
    queue_id: int = 0
    flag: int = 0
    queue_offset: int = 0
    commit_log_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = ("127.0.0.1", 0)
    store_timestamp: int = 0
    store_host: Host = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    body_crc: int | None = None  # None: computed from the body when encoded


def encode_properties(properties: dict[str, str]) -> str:
    return "".join(f"{name}{NAME_VALUE_SEPARATOR}{value}{PROPERTY_SEPARATOR}" for name, value in properties.items())


def decode_properties(text: str) -> dict[str, str]:
    """RocketMQ's string2messageProperties: an item shorter than 3 characters, or without a name or a value, is
    skipped; the last item of a name wins."""
    properties: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        if len(item) < 3:
            continue
        name, separator, value = item.partition(NAME_VALUE_SEPARATOR)
        if separator and name and value:
            properties[name] = value
    return properties


@functools.lru_cache(maxsize=1024)
def _packed(address: str) -> tuple[bytes, bool]:
    """An address's bytes and whether it is IPv6 (cached: a store's records name few hosts, and ipaddress's parse
    cost more than the rest of a record's encoding)."""
    parsed = ipaddress.ip_address(address)
    return parsed.packed, parsed.version == 6


@functools.lru_cache(maxsize=1024)
def _unpacked(packed: bytes) -> str:
    return str(ipaddress.ip_address(packed))


def _host(host: Host, flag: int, sys_flag: int) -> tuple[bytes, int]:
    packed, v6 = _packed(host[0])
    return packed + _I32.pack(host[1]), (sys_flag | flag) if v6 else sys_flag


def encode_record(record: MessageRecord) -> bytes:
    topic = record.topic.encode()
    if len(topic) > MAX_TOPIC_BYTES:
        raise MessageLayoutError(f"topic {record.topic!r} is {len(topic)} bytes: RocketMQ 4's layout holds 127 at most")
    properties = encode_properties(record.properties).encode()
    if len(properties) > MAX_PROPERTIES_BYTES:
        raise MessageLayoutError(f"properties of {len(properties)} bytes: RocketMQ 4's layout holds 32,767 at most")
    sys_flag = record.sys_flag & ~(BORNHOST_V6_FLAG | STOREHOST_V6_FLAG)
    born, sys_flag = _host(record.born_host, BORNHOST_V6_FLAG, sys_flag)
    store, sys_flag = _host(record.store_host, STOREHOST_V6_FLAG, sys_flag)
    body = record.body
    # RocketMQ's CRC is zlib's with the sign bit cleared (UtilAll.crc32), as clients that check it compute it.
    crc = (record.body_crc if record.body_crc is not None else zlib.crc32(body)) & 0x7FFFFFFF
    size = _HEAD.size + len(born) + 8 + len(store) + 4 + 8 + 4 + len(body) + 1 + len(topic) + 2 + len(properties)
    return b"".join(
        (
            _HEAD.pack(
                size,
                MESSAGE_MAGIC,
                crc,
                record.queue_id,
                record.flag,
                record.queue_offset,
                record.commit_log_offset,
                sys_flag,
                record.born_timestamp,
            ),
            born,
            _I64.pack(record.store_timestamp),
            store,
            _I32.pack(record.reconsume_times),
            _I64.pack(record.prepared_transaction_offset),
            _I32.pack(len(body)),
            body,
            bytes((len(topic),)),
            topic,
            _I16.pack(len(properties)),
            properties,
        )
    )


def decode_records(data: bytes, decompress: bool = True) -> list[MessageRecord]:
    """The records of a pull reply's body (MessageDecoder.decodes); a compressed body (zlib) is inflated unless
    `decompress` is False."""
    records = []
    view = memoryview(data)
    position = 0
    try:
        while position < len(view):
            size, magic, crc, queue_id, flag, queue_offset, commit_offset, sys_flag, born_ts = _HEAD.unpack_from(
                view, position
            )
            if magic != MESSAGE_MAGIC or size <= _HEAD.size or position + size > len(view):
                raise MessageLayoutError(f"no message at byte {position} (size {size}, magic {magic:#x})")
            at = position + _HEAD.size
            born, at = _read_host(view, at, bool(sys_flag & BORNHOST_V6_FLAG))
            (store_ts,) = _I64.unpack_from(view, at)
            store, at = _read_host(view, at + 8, bool(sys_flag & STOREHOST_V6_FLAG))
            (reconsume,) = _I32.unpack_from(view, at)
            (prepared,) = _I64.unpack_from(view, at + 4)
            (body_size,) = _I32.unpack_from(view, at + 12)
            at += 16
            body = bytes(view[at : at + body_size])
            at += body_size
            topic_size = view[at]
            topic = str(view[at + 1 : at + 1 + topic_size], "utf-8")
            at += 1 + topic_size
            (properties_size,) = _I16.unpack_from(view, at)
            properties = decode_properties(str(view[at + 2 : at + 2 + properties_size], "utf-8"))
            if at + 2 + properties_size != position + size:
                raise MessageLayoutError(f"message at byte {position}: its fields do not add up to its size {size}")
            if decompress and sys_flag & COMPRESSED_FLAG:
                body = zlib.decompress(body)
            records.append(
                MessageRecord(
                    topic,
                    body,
                    queue_id,
                    flag,
                    queue_offset,
                    commit_offset,
                    sys_flag,
                    born_ts,
                    born,
                    store_ts,
                    store,
                    reconsume,
                    prepared,
                    properties,
                    crc,
                )
            )
            position += size
    except (struct.error, UnicodeDecodeError, IndexError, zlib.error) as exc:
        raise MessageLayoutError(f"message at byte {position} does not decode: {exc}") from None
    return records


def _read_host(view: memoryview, at: int, v6: bool) -> tuple[Host, int]:
    size = 16 if v6 else 4
    address = _unpacked(bytes(view[at : at + size]))
    (port,) = _I32.unpack_from(view, at + size)
    return (address, port), at + size + 4


def encode_batch(messages: list[tuple[int, bytes, dict[str, str]]]) -> bytes:
    """A producer's batch body (MessageDecoder.encodeMessages): (flag, body, properties) per message."""
    parts = []
    for flag, body, properties in messages:
        text = encode_properties(properties).encode()
        size = _BATCH_HEAD.size + len(body) + 2 + len(text)
        parts += [_BATCH_HEAD.pack(size, 0, 0, flag, len(body)), body, _I16.pack(len(text)), text]
    return b"".join(parts)


def decode_batch(data: bytes) -> list[tuple[int, bytes, dict[str, str]]]:
    """The messages of a SEND_BATCH_MESSAGE body: (flag, body, properties) each. Raises MessageLayoutError, naming
    the byte, for one that does not fit."""
    messages = []
    view = memoryview(data)
    position = 0
    while position < len(view):
        try:
            size, _, _, flag, body_size = _BATCH_HEAD.unpack_from(view, position)
            at = position + _BATCH_HEAD.size
            if body_size < 0 or at + body_size + 2 > len(view):
                raise MessageLayoutError(f"batch message at byte {position}: body of {body_size} bytes past the end")
            body = bytes(view[at : at + body_size])
            at += body_size
            (properties_size,) = _I16.unpack_from(view, at)
            if properties_size < 0 or at + 2 + properties_size > len(view):
                raise MessageLayoutError(f"batch message at byte {position}: properties past the end")
            properties = decode_properties(str(view[at + 2 : at + 2 + properties_size], "utf-8"))
        except (struct.error, UnicodeDecodeError) as exc:
            raise MessageLayoutError(f"batch message at byte {position} does not decode: {exc}") from None
        end = at + 2 + properties_size
        if size != end - position:
            raise MessageLayoutError(
                f"batch message at byte {position}: total size {size}, its fields {end - position}"
            )
        messages.append((flag, body, properties))
        position = end
    return messages


def offset_message_id(store_host: Host, commit_log_offset: int) -> str:
    """The offset message id: the store host's IPv4 address and port and the commit-log offset, 32 hex digits
    (an IPv6 store host gives 56: 16 bytes of address)."""
    address = ipaddress.ip_address(store_host[0]).packed
    return (address + _I32.pack(store_host[1]) + _I64.pack(commit_log_offset)).hex().upper()
