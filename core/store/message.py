"""Messages as the store takes them in (`Message`) and gives them back (`StoredMessage`), and their properties.

Properties travel in the record as RocketMQ encodes them: `name \\x01 value \\x02` repeated. The well-known
names are RocketMQ's (`TAGS`, `KEYS`, `UNIQ_KEY`, ...), so a message means the same to every front door.
"""

from __future__ import annotations

import functools
import ipaddress
import operator
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.store.errors import InvalidMessageError

PROPERTY_TAGS = "TAGS"
PROPERTY_KEYS = "KEYS"
PROPERTY_UNIQ_KEY = "UNIQ_KEY"
# RocketMQ 5 clients carry a FIFO message's group (the sharding key) here.
PROPERTY_MESSAGE_GROUP = "__SHARDINGKEY"
KEY_SEPARATOR = " "
# Light message queues (RocketMQ's LMQ): a record that names light queues here, separated by commas, gets a
# consume-queue entry in queue 0 of each of them as well as in its own queue; the body is stored once. The
# light queues' offsets are assigned at append, in log order, and not written into the record: recovery assigns
# the same ones again by replaying the log in the same order.
PROPERTY_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
MULTI_DISPATCH_SEPARATOR = ","
LIGHT_QUEUE_PREFIX = "%LMQ%"
# A record carrying this property (a decimal integer) gets that number, not its tag hash, in its consume-queue
# entry: the broker's schedulers keep there the time they must look at a parked message (RocketMQ keeps deliver
# timestamps in SCHEDULE_TOPIC's tag codes), so they can rebuild their state from the queue without reading records.
PROPERTY_TAG_CODE = "__TAG_CODE"
# Properties the core writes for its own bookkeeping. A copy of a message sent again must not carry them: a
# dead-letter copy would be dispatched into the light queues of the original.
INTERNAL_PROPERTIES = frozenset({PROPERTY_MULTI_DISPATCH, PROPERTY_TAG_CODE})

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
# The properties length is an unsigned 16-bit field of the record.
MAX_PROPERTIES_LENGTH = 0xFFFF

# sys_flag bits, as RocketMQ's MessageSysFlag.
SYSFLAG_COMPRESSED = 0x1
SYSFLAG_MULTI_TAGS = 0x2
SYSFLAG_TRANSACTION_PREPARED = 0x4
SYSFLAG_TRANSACTION_COMMIT = 0x8
SYSFLAG_TRANSACTION_ROLLBACK = 0xC
SYSFLAG_TRANSACTION_MASK = 0xC


class WellKnownProperties:
    """Accessors for the properties every RocketMQ user knows by name."""

    __slots__ = ()
    properties: dict[str, str]

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
        """A copy of the properties without the core's internal ones (INTERNAL_PROPERTIES): what a front door may
        show, or give to a copy of the message it sends again. RocketMQ's well-known ones (TAGS, KEYS, UNIQ_KEY)
        stay: every front door may read them."""
        return {name: value for name, value in self.properties.items() if name not in INTERNAL_PROPERTIES}


def is_light_queue(topic: str) -> bool:
    return topic.startswith(LIGHT_QUEUE_PREFIX)


@dataclass(slots=True)
class Message(WellKnownProperties):
    """A message handed to the store for appending (RocketMQ's MessageExtBrokerInner).

    `light_queues`: light queues (names starting with %LMQ%) a sender asks the broker to dispatch the message to as
    well. The broker writes them, with those its send hooks name, into the PROPERTY_MULTI_DISPATCH property; the
    store reads only that property, so a message appended to the store directly names them there.
    """

    topic: str
    body: bytes
    queue_id: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    flag: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: tuple[str, int] = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    light_queues: Sequence[str] = ()


@dataclass(slots=True)
class StoredMessage(WellKnownProperties):
    """A message read back from the commit log (RocketMQ's MessageExt). Treat as read-only; not frozen because
    one is built per message read, and frozen dataclasses are several times slower to build."""

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

    @property
    def light_queues(self) -> list[str]:
        """The light queues the message was dispatched to as well (its PROPERTY_MULTI_DISPATCH property)."""
        names = self.properties.get(PROPERTY_MULTI_DISPATCH)
        return names.split(MULTI_DISPATCH_SEPARATOR) if names else []

    @property
    def offset_msg_id(self) -> str:
        from core.store.message_id import encode_offset_msg_id

        return encode_offset_msg_id(self.store_host, self.commit_log_offset)


def split_keys(keys: str | None) -> list[str]:
    return [k for k in keys.split(KEY_SEPARATOR) if k] if keys else []


def tags_code(tags: str | None) -> int:
    """The tag hash kept in consume-queue entries: stable across processes (Python's hash() is not)."""
    return zlib.crc32(tags.encode()) if tags else 0


def entry_code(properties: dict[str, str]) -> int:
    """What a record's consume-queue entry carries: PROPERTY_TAG_CODE if the record has it, else the tag hash."""
    given = properties.get(PROPERTY_TAG_CODE)
    if given is not None:
        return int(given)
    return tags_code(properties.get(PROPERTY_TAGS))


_join_name_value = NAME_VALUE_SEPARATOR.join
_split_name_value = operator.methodcaller("split", NAME_VALUE_SEPARATOR, 1)


def encode_properties(properties: dict[str, str]) -> bytes:
    if not properties:
        return b""
    if len(properties) == 1:
        # One property (a producer's UNIQ_KEY alone, the most common record) is checked directly: 0.22 us against
        # 0.60 for the join and counts below, a tenth of an append of 128 bytes (profiled with py-spy).
        for name, value in properties.items():
            if (
                type(name) is str
                and type(value) is str
                and name
                and NAME_VALUE_SEPARATOR not in name
                and PROPERTY_SEPARATOR not in name
                and NAME_VALUE_SEPARATOR not in value
                and PROPERTY_SEPARATOR not in value
            ):
                encoded = (name + NAME_VALUE_SEPARATOR + value + PROPERTY_SEPARATOR).encode()
                if len(encoded) <= MAX_PROPERTIES_LENGTH:
                    return encoded
    # Every append encodes its properties, so the usual case is checked by C string methods: str.join refuses
    # anything but strings, and with one name-value separator per property, one property separator between each
    # two and no empty name, no name or value can hold a separator. Anything else goes to the loop below, which
    # says what is wrong.
    try:
        text = PROPERTY_SEPARATOR.join(map(_join_name_value, properties.items()))
    except TypeError:
        text = ""
    count = len(properties)
    if (
        text.count(NAME_VALUE_SEPARATOR) == count
        and text.count(PROPERTY_SEPARATOR) == count - 1
        and text[0] != NAME_VALUE_SEPARATOR
        and PROPERTY_SEPARATOR + NAME_VALUE_SEPARATOR not in text
    ):
        encoded = (text + PROPERTY_SEPARATOR).encode()
        if len(encoded) <= MAX_PROPERTIES_LENGTH:
            return encoded
    return _encode_properties_checked(properties)


def _encode_properties_checked(properties: dict[str, str]) -> bytes:
    parts = []
    for name, value in properties.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise InvalidMessageError(f"property {name!r}: names and values must be strings")
        if not name:
            raise InvalidMessageError("property with an empty name")
        for text in (name, value):
            if NAME_VALUE_SEPARATOR in text or PROPERTY_SEPARATOR in text:
                raise InvalidMessageError(
                    f"property {name!r}: the characters \\x01 and \\x02 are reserved as separators"
                )
        parts.append(f"{name}\x01{value}\x02")
    encoded = "".join(parts).encode()
    if len(encoded) > MAX_PROPERTIES_LENGTH:
        raise InvalidMessageError(
            f"properties take {len(encoded)} bytes encoded; at most {MAX_PROPERTIES_LENGTH} are allowed"
        )
    return encoded


def decode_properties(data: bytes) -> dict[str, str]:
    if not data:
        return {}
    text = data.decode()
    # Every message read decodes its properties: the usual blob (each item `name \x01 value`, ended by \x02) is
    # split into pairs by C string methods, one Python call per blob instead of a loop per item. An empty item
    # or one without its separator leaves a pair of one string, which dict() refuses: the loop below then skips
    # the empty ones and says which item is wrong, as before.
    if text[-1] == PROPERTY_SEPARATOR:
        try:
            return dict(map(_split_name_value, text[:-1].split(PROPERTY_SEPARATOR)))
        except ValueError:
            pass
    properties = {}
    for item in text.split(PROPERTY_SEPARATOR):
        if item:
            name, sep, value = item.partition(NAME_VALUE_SEPARATOR)
            if not sep:
                raise ValueError(f"property item {item[:40]!r} has no name/value separator")
            properties[name] = value
    return properties


@functools.lru_cache(maxsize=4096)
def encode_host(host: str) -> bytes:
    """16 bytes: the IPv6 address, or the IPv4-mapped form of an IPv4 address."""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        raise InvalidMessageError(f"host {host!r} is not an IP address") from None
    if isinstance(address, ipaddress.IPv4Address):
        return b"\x00" * 10 + b"\xff\xff" + address.packed
    return address.packed


@functools.lru_cache(maxsize=4096)
def decode_host(packed: bytes) -> str:
    address = ipaddress.IPv6Address(packed)
    mapped = address.ipv4_mapped
    return str(mapped) if mapped is not None else str(address)
