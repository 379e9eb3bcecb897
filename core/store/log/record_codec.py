"""The byte layout of a commit-log record, and its encoder and decoder. Pure code: no files, no I/O.

Every integer is big-endian (RocketMQ's layout is Java's). A record:

    offset  size  field
    0       4     total_size                 whole record, these 4 bytes included
    4       4     magic                      RECORD_MAGIC, or BLANK_MAGIC for the end-of-segment filler
    8       4     record_crc                 CRC32 of bytes [12, 116) and of the tail after the body
    12      4     body_crc                   CRC32 of the body (RocketMQ's BODYCRC)
    16      4     queue_id
    20      4     flag                       the producer's flag, opaque to the store
    24      8     queue_offset               index of the message in its consume queue
    32      8     physical_offset            offset of this record in the commit log (a resync marker too)
    40      4     sys_flag                   compressed, transaction state (core.store.message.SYSFLAG_*)
    44      8     born_timestamp             ms since the epoch, set by the producer
    52      16    born_host                  IPv6, or IPv4-mapped IPv6
    68      4     born_port
    72      8     store_timestamp            ms since the epoch, set by the store
    80      16    store_host
    96      4     store_port
    100     4     reconsume_times
    104     8     prepared_transaction_offset
    112     4     body_length
    116     n     body
    116+n   2     topic_length
    ...     t     topic (ASCII)
    ...     2     properties_length
    ...     p     properties (UTF-8, `name \\x01 value \\x02` repeated)

Unlike RocketMQ, hosts are always 16 bytes (no IPv6 flag changes the layout) and the record carries a second
CRC besides the body CRC: it covers the header after its first 12 bytes (body_crc included) and the tail, so a
flipped bit in the topic or properties is caught, and no byte of the record goes unchecked while the body is
read by the CRC once. total_size and magic are checked by their ranges and by the lengths adding up.

When a record does not fit in the rest of a segment, a filler record (total_size = bytes left, BLANK_MAGIC)
closes the segment and the record goes to the next one. A record is placed only where at least
BLANK_MIN_SIZE bytes stay free after it, so there is always room for the filler.
"""

from __future__ import annotations

import mmap
import struct
from typing import Any, Final

from core.store.errors import RecordFormatError
from core.store.log.checksum import crc32
from core.store.log.property_codec import PROPERTY_KEYS, PROPERTY_UNIQ_KEY, decode_properties_text
from core.store.message import decode_host
from core.store.stored_message import StoredMessage

# What the decoder reads from: a segment's mapping, or bytes in tests.
Buffer = bytes | bytearray | memoryview | mmap.mmap

RECORD_MAGIC: Final = 0x4D514701  # "MQG" 1
BLANK_MAGIC: Final = 0x4D514702
PREFIX: Final = struct.Struct(">iII")  # total_size, magic, record_crc
REST: Final = struct.Struct(">Iiiqqiq16siq16siiqi")  # body_crc .. body_length
HEADER_SIZE: Final = PREFIX.size + REST.size
assert HEADER_SIZE == 116
# The struct methods called for every record, bound once: Final, the compiled module holds each in a C static and
# calls it directly, where `REST.pack(...)` looks up the method on every call.
_pack_prefix: Final = PREFIX.pack
_pack_rest: Final = REST.pack
U16: Final = struct.Struct(">H")
SIZE_MAGIC: Final = struct.Struct(">iI")
INT64: Final = struct.Struct(">q")
STORE_TIMESTAMP: Final = struct.Struct(">q")
BLANK_MIN_SIZE: Final = SIZE_MAGIC.size
# Offsets of fields read on their own (by recovery and by time lookups).
PHYSICAL_OFFSET_POS: Final = 32
STORE_TIMESTAMP_POS: Final = 72
BODY_LENGTH_POS: Final = 112
MIN_RECORD_SIZE: Final = HEADER_SIZE + 2 + 1 + 2


def encode_topic(topic: bytes) -> bytes:
    """topic_length and topic: the same for every record of a topic, so callers keep it."""
    return U16.pack(len(topic)) + topic


def encode_tail(topic_part: bytes, properties: bytes) -> bytes:
    """The part after the body (encode_topic's result, then the properties). It does not depend on where the
    record lands, so it is built outside locks."""
    return topic_part + U16.pack(len(properties)) + properties


def encode_header(
    body: bytes,
    body_crc: int,
    tail: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    born_port: int,
    store_timestamp: int,
    store_host: bytes,
    store_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
) -> bytes:
    """The 116-byte header of a record; the record is header + body + tail. Writers copy the three parts into
    place one after the other, so a large body is copied once."""
    rest = _pack_rest(
        body_crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
        born_host,
        born_port,
        store_timestamp,
        store_host,
        store_port,
        reconsume_times,
        prepared_transaction_offset,
        len(body),
    )
    return _pack_prefix(HEADER_SIZE + len(body) + len(tail), RECORD_MAGIC, crc32(tail, crc32(rest))) + rest


def append_record(
    out: bytearray,
    body: bytes,
    tail: bytes,
    queue_id: int,
    flag: int,
    queue_offset: int,
    physical_offset: int,
    sys_flag: int,
    born_timestamp: int,
    born_host: bytes,
    born_port: int,
    store_timestamp: int,
    store_host: bytes,
    store_port: int,
    reconsume_times: int,
    prepared_transaction_offset: int,
) -> None:
    """Append the whole record (header, body, tail) to `out`: `encode_header`'s layout, for writers that lay out
    several records before one copy into place."""
    rest = _pack_rest(
        crc32(body),
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
        born_host,
        born_port,
        store_timestamp,
        store_host,
        store_port,
        reconsume_times,
        prepared_transaction_offset,
        len(body),
    )
    out += _pack_prefix(HEADER_SIZE + len(body) + len(tail), RECORD_MAGIC, crc32(tail, crc32(rest)))
    out += rest
    out += body
    out += tail


def encode_record(body: bytes, body_crc: int, tail: bytes, *fields: int | bytes) -> bytes:
    """The whole record as one bytes object (encode_header's arguments)."""
    return b"".join((encode_header(body, body_crc, tail, *fields), body, tail))  # type: ignore[arg-type]


def encode_blank(size: int) -> bytes:
    return SIZE_MAGIC.pack(size, BLANK_MAGIC)


def record_size_at(buffer: Buffer, pos: int) -> tuple[int, int]:
    """(total_size, magic) of the record at `pos`."""
    return SIZE_MAGIC.unpack_from(buffer, pos)


# The whole 116-byte header in one unpack, for readers, each host read with its port as one 20-byte field: a log
# holds few of those pairs, and the decoder keeps the (host, port) each decodes to (_kept_address).
HEADER: Final = struct.Struct(">iIIIiiqqiq20sq20siqi")
assert HEADER.size == HEADER_SIZE
_unpack_header: Final = HEADER.unpack_from
# What indexing reads of a header (decode_keyed_fields): total_size, magic, record_crc, store_timestamp, body_length.
KEYED_HEADER: Final = struct.Struct(">iII60xq32xi")
assert KEYED_HEADER.size == HEADER_SIZE
_unpack_keyed_header: Final = KEYED_HEADER.unpack_from


def _checked(
    view: memoryview, pos: int, limit: int, check_body: bool = True, check_crcs: bool = True
) -> tuple[tuple[Any, ...], int, int, int]:
    """Check the record at `pos` (size, magic, both CRCs, inner lengths) in one pass over its header; without
    `check_body`, the body's CRC is left to the body's readers; without `check_crcs`, neither CRC is computed (see
    decode_record).

    Returns (header fields, topic position, properties position, end), positions absolute in `view`.
    """
    if pos + MIN_RECORD_SIZE > limit:
        raise RecordFormatError("too few bytes left for a record")
    fields = _unpack_header(view, pos)
    topic_pos, props_pos, end = _check(
        view, pos, limit, fields[0], fields[1], fields[2], fields[3], fields[15], check_body, check_crcs
    )
    return fields, topic_pos, props_pos, end


def _check(
    view: memoryview,
    pos: int,
    limit: int,
    total: int,
    magic: int,
    record_crc: int,
    body_crc: int,
    body_length: int,
    check_body: bool,
    check_crcs: bool,
) -> tuple[int, int, int]:
    """_checked's checks, on the header fields its caller unpacked (the arguments are typed, so that the compiled
    module does its arithmetic and comparisons on C integers, not on objects); (topic position, properties
    position, end)."""
    if magic != RECORD_MAGIC:
        raise RecordFormatError(f"bad magic 0x{magic & 0xFFFFFFFF:08x}")
    end = pos + total
    if total < MIN_RECORD_SIZE or end > limit:
        raise RecordFormatError(f"total size {total} out of range")
    topic_pos = pos + HEADER_SIZE + body_length
    if body_length < 0 or topic_pos + 2 > end:
        raise RecordFormatError(f"body length {body_length} out of range")
    if check_crcs and crc32(view[topic_pos:end], crc32(view[pos + 12 : pos + HEADER_SIZE])) != record_crc:
        raise RecordFormatError("record CRC mismatch")
    props_pos = topic_pos + 2 + (view[topic_pos] << 8 | view[topic_pos + 1])
    if props_pos + 2 > end:
        raise RecordFormatError("topic length out of range")
    if props_pos + 2 + (view[props_pos] << 8 | view[props_pos + 1]) != end:
        raise RecordFormatError("lengths do not add up to the total size")
    if check_body and check_crcs and crc32(view[pos + HEADER_SIZE : topic_pos]) != body_crc:
        raise RecordFormatError("body CRC mismatch")
    return topic_pos, props_pos, end


def _view(buffer: Buffer) -> memoryview:
    """A byte view of `buffer`; the commit log passes its segments' views, which are used as they are."""
    if isinstance(buffer, memoryview):
        return buffer
    return memoryview(buffer)


def check_record(buffer: Buffer, pos: int, limit: int) -> int:
    """Validate the record at `pos` and return its total size; RecordFormatError says what is wrong.
    Builds no message: recovery calls this for every record it scans."""
    total: int = _checked(_view(buffer), pos, limit)[0][0]
    return total


# Topic names and (host, port) pairs decoded, by their bytes in the record: a log holds few of either, and each read
# would otherwise decode (and keep a string and a tuple of) its own copy. Cleared when full, as the hosts and ports
# of many clients come and go.
_TOPIC_NAMES: Final[dict[bytes, str]] = {}
_ADDRESSES: Final[dict[bytes, tuple[str, int]]] = {}
NAMES_KEPT: Final = 4096
PORT: Final = struct.Struct(">i")


def _kept_topic(raw: bytes) -> str:
    """The topic name `raw` (ASCII) decodes to, from _TOPIC_NAMES when it was decoded before."""
    name = _TOPIC_NAMES.get(raw)
    if name is None:
        if len(_TOPIC_NAMES) >= NAMES_KEPT:
            _TOPIC_NAMES.clear()
        name = _TOPIC_NAMES[raw] = raw.decode("ascii")
    return name


def _kept_address(raw: bytes) -> tuple[str, int]:
    """The (host, port) a host field and its port (20 bytes) decode to, from _ADDRESSES when decoded before."""
    address = _ADDRESSES.get(raw)
    if address is None:
        if len(_ADDRESSES) >= NAMES_KEPT:
            _ADDRESSES.clear()
        address = _ADDRESSES[raw] = (decode_host(raw[:16]), PORT.unpack_from(raw, 16)[0])
    return address


# The properties indexing reads (decode_keyed_fields): the others' values are not sliced out.
_INDEX_NAMES: Final = frozenset((PROPERTY_KEYS, PROPERTY_UNIQ_KEY))


def decode_keyed_fields(buffer: Buffer, pos: int, limit: int) -> tuple[int, int, str, str | None, str | None]:
    """(total size, store timestamp, topic, keys, unique id) of the record at `pos`: what indexing it needs, without
    copying or checking the body (the record CRC covers the rest), and of the header and properties only what it
    uses (the index process reads every record this way). Raises RecordFormatError."""
    view = _view(buffer)
    if pos + MIN_RECORD_SIZE > limit:
        raise RecordFormatError("too few bytes left for a record")
    total, magic, record_crc, store_timestamp, body_length = _unpack_keyed_header(view, pos)
    topic_pos, props_pos, end = _check(view, pos, limit, total, magic, record_crc, 0, body_length, False, True)
    topic, properties = _topic_and_properties(view, topic_pos, props_pos, end, _INDEX_NAMES)
    return total, store_timestamp, topic, properties.get(PROPERTY_KEYS), properties.get(PROPERTY_UNIQ_KEY)


def _topic_and_properties(
    view: memoryview, topic_pos: int, props_pos: int, end: int, only: frozenset[str] | None = None
) -> tuple[str, dict[str, str]]:
    """The record's topic and its properties (with `only`, those of these names)."""
    try:
        topic = _kept_topic(view[topic_pos + 2 : props_pos].tobytes())
        if end == props_pos + 2:
            return topic, {}
        return topic, decode_properties_text(view[props_pos + 2 : end].tobytes().decode(), only)
    except (UnicodeDecodeError, ValueError) as exc:
        raise RecordFormatError(f"undecodable topic or properties: {exc}") from None


def decode_record(buffer: Buffer, pos: int, limit: int, check_crcs: bool = True) -> StoredMessage:
    """Check and decode the record at `pos`. Raises RecordFormatError; never returns unchecked bytes.

    The CRCs catch bytes that changed after they were written: on disk, or on the way back from it. Without
    `check_crcs`, for bytes this process wrote into memory that has not left it since (the commit log's write
    ring), they are not computed: the record's magic, sizes and lengths are still checked, and its caller checks
    its position."""
    view = _view(buffer)
    fields, topic_pos, props_pos, end = _checked(view, pos, limit, True, check_crcs)
    (
        total,
        _magic,
        _record_crc,
        body_crc,
        queue_id,
        flag,
        queue_offset,
        physical_offset,
        sys_flag,
        born_timestamp,
        born_address,
        store_timestamp,
        store_address,
        reconsume_times,
        prepared_transaction_offset,
        _body_length,
    ) = fields
    topic, properties = _topic_and_properties(view, topic_pos, props_pos, end)
    return StoredMessage(
        topic,
        bytes(view[pos + HEADER_SIZE : topic_pos]),
        queue_id,
        queue_offset,
        physical_offset,
        total,
        body_crc,
        flag,
        sys_flag,
        born_timestamp,
        _kept_address(born_address),
        store_timestamp,
        _kept_address(store_address),
        reconsume_times,
        prepared_transaction_offset,
        properties,
    )
