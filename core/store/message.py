"""Messages as the store takes them in (`Message`) and gives them back (`StoredMessage`), and their properties.

Properties travel in the record as RocketMQ encodes them: `name \\x01 value \\x02` repeated. The well-known
names are RocketMQ's (`TAGS`, `KEYS`, `UNIQ_KEY`, ...), so a message means the same to every front door.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from core.store.errors import InvalidMessageError
from core.store.property_codec import MAX_PROPERTIES_LENGTH as MAX_PROPERTIES_LENGTH
from core.store.property_codec import PROPERTY_TAG_CODE as PROPERTY_TAG_CODE
from core.store.property_codec import PROPERTY_TAGS as PROPERTY_TAGS
from core.store.property_codec import decode_properties as decode_properties
from core.store.property_codec import encode_properties as encode_properties
from core.store.property_codec import entry_code as entry_code
from core.store.property_codec import tags_code as tags_code

PROPERTY_KEYS: Final = "KEYS"
PROPERTY_UNIQ_KEY: Final = "UNIQ_KEY"
# RocketMQ 5 clients carry a FIFO message's group (the sharding key) here.
PROPERTY_MESSAGE_GROUP: Final = "__SHARDINGKEY"
KEY_SEPARATOR: Final = " "
# Light message queues (RocketMQ's LMQ): a record that names light queues here, separated by commas, gets a
# consume-queue entry in queue 0 of each of them as well as in its own queue; the body is stored once. The
# light queues' offsets are assigned at append, in log order, and not written into the record: recovery assigns
# the same ones again by replaying the log in the same order.
PROPERTY_MULTI_DISPATCH: Final = "INNER_MULTI_DISPATCH"
MULTI_DISPATCH_SEPARATOR: Final = ","
LIGHT_QUEUE_PREFIX: Final = "%LMQ%"
# Properties the core writes for its own bookkeeping. A copy of a message sent again must not carry them: a
# dead-letter copy would be dispatched into the light queues of the original.
INTERNAL_PROPERTIES = frozenset({PROPERTY_MULTI_DISPATCH, PROPERTY_TAG_CODE})


# sys_flag bits, as RocketMQ's MessageSysFlag.
SYSFLAG_COMPRESSED: Final = 0x1
SYSFLAG_MULTI_TAGS: Final = 0x2
SYSFLAG_TRANSACTION_PREPARED: Final = 0x4
SYSFLAG_TRANSACTION_COMMIT: Final = 0x8
SYSFLAG_TRANSACTION_ROLLBACK: Final = 0xC
SYSFLAG_TRANSACTION_MASK: Final = 0xC


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
