"""Messages as the store takes them in (`Message`) and gives them back (`StoredMessage`, from the compiled
core.store.stored_message), and their properties.

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
from core.store.log.property_codec import INTERNAL_PROPERTIES as INTERNAL_PROPERTIES
from core.store.log.property_codec import KEY_SEPARATOR as KEY_SEPARATOR
from core.store.log.property_codec import MAX_PROPERTIES_LENGTH as MAX_PROPERTIES_LENGTH
from core.store.log.property_codec import MULTI_DISPATCH_SEPARATOR as MULTI_DISPATCH_SEPARATOR
from core.store.log.property_codec import PROPERTY_KEYS as PROPERTY_KEYS
from core.store.log.property_codec import PROPERTY_MULTI_DISPATCH as PROPERTY_MULTI_DISPATCH
from core.store.log.property_codec import PROPERTY_TAG_CODE as PROPERTY_TAG_CODE
from core.store.log.property_codec import PROPERTY_TAGS as PROPERTY_TAGS
from core.store.log.property_codec import PROPERTY_UNIQ_KEY as PROPERTY_UNIQ_KEY
from core.store.log.property_codec import decode_properties as decode_properties
from core.store.log.property_codec import encode_properties as encode_properties
from core.store.log.property_codec import entry_code as entry_code
from core.store.log.property_codec import public_properties
from core.store.log.property_codec import split_keys as split_keys
from core.store.log.property_codec import tags_code as tags_code
from core.store.stored_message import StoredMessage as StoredMessage

# RocketMQ 5 clients carry a FIFO message's group (the sharding key) here.
PROPERTY_MESSAGE_GROUP: Final = "__SHARDINGKEY"
LIGHT_QUEUE_PREFIX: Final = "%LMQ%"


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
        """core.store.log.property_codec.public_properties of the message's properties."""
        return public_properties(self.properties)


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
