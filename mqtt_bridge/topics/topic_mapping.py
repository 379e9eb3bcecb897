"""Which core topic an MQTT message is stored in: a total mapping from MQTT topic names to core topic names.

MQTT allows almost any UTF-8 in a topic name ('/TopicA', 'home kitchen/temp', 'dev.1/temp', 'Gerät/x', '$SYS/load');
a core topic name is 1 to 127 characters from [%|a-zA-Z0-9_-] (RocketMQ's TopicValidator), because it names
directories of the store. The core topic is chosen by the first level of the MQTT topic:

- A first level of 1 to 127 characters from [A-Za-z0-9_-] that is not one of the core's own names
  (`RESERVED_PREFIXES`) is the core topic itself: `sensors/dev1/temp` -> `sensors`. This is the mapping data
  directories written before the escaped form existed use, so they keep working unchanged.
- Any other first level (empty, with a space, a dot, a '$', non-ASCII letters, a reserved name, too long) is
  escaped into `%MQTT%<escaped>`: each UTF-8 byte outside [A-Za-z0-9-] becomes '_' and two upper-case hex digits,
  so the escape is reversible (`first_level_of`) and distinct first levels get distinct core topics:

      '/TopicA'            -> '%MQTT%'                 (empty first level)
      'home kitchen/temp'  -> '%MQTT%home_20kitchen'
      'dev.1/temp'         -> '%MQTT%dev_2E1'
      'Gerät/x'            -> '%MQTT%Ger_C3_A4t'
      '$SYS/broker/load'   -> '%MQTT%_24SYS'
      'MQTT_SESSIONS/x'    -> '%MQTT%MQTT_5FSESSIONS'  (a name the gateway uses itself)

  An escaped name longer than 127 characters keeps its first 104 and appends '|' and 16 hex digits of a BLAKE2b
  hash of the first level: still one core topic per first level (barring a 64-bit hash collision), no longer
  reversible, which does not matter: the full MQTT topic travels with every message (message_mapping.py).

The core topic only says where a message is stored and which core consumers see it; routing to MQTT subscribers
uses the full MQTT topic, byte for byte, and so do EventBridge sources, connectors and the Spark sink.
"""

from __future__ import annotations

import functools
import hashlib
import re

# RocketMQ's TopicValidator.TOPIC_MAX_LENGTH, which the store keeps (core topics name directories).
MAX_CORE_TOPIC_LENGTH = 127
ESCAPED_PREFIX = "%MQTT%"
# Core names a device must never write into by naming them as its first level: the gateway's own topics, the
# connector runtime's (configs and positions: a device could otherwise inject a connector), RocketMQ's system
# topics. Such a first level is escaped like any other, so it still works as an MQTT topic.
RESERVED_PREFIXES = (
    "MQTT_",
    "connect-",
    "RMQ_SYS_",
    "rmq_sys_",
    "SCHEDULE_TOPIC_",
    "TRANS_CHECK_MAX_TIME_TOPIC",
    "TBW102",
)
# An escaped name that would be too long: its head, then '|' and the hash (104 + 6 + 1 + 16 = 127).
_HASH_HEX_DIGITS = 16
_HEAD_LENGTH = MAX_CORE_TOPIC_LENGTH - len(ESCAPED_PREFIX) - 1 - _HASH_HEX_DIGITS
_PLAIN = re.compile(r"[A-Za-z0-9_-]{1,127}")
# Bytes kept as they are by the escape; '_' is the escape character and so is escaped itself.
_KEPT = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")


def core_topic_of(mqtt_topic: str) -> str:
    """The core topic that stores messages published to `mqtt_topic` (a valid MQTT topic name or filter whose
    first level has no wildcard)."""
    return core_topic_of_level(mqtt_topic.partition("/")[0])


@functools.lru_cache(maxsize=4096)
def core_topic_of_level(first_level: str) -> str:
    """The core topic of an MQTT first level (cached: a device publishes under few first levels)."""
    if _PLAIN.fullmatch(first_level) and not first_level.startswith(RESERVED_PREFIXES):
        return first_level
    escaped = "".join(chr(byte) if byte in _KEPT else f"_{byte:02X}" for byte in first_level.encode("utf-8"))
    name = ESCAPED_PREFIX + escaped
    if len(name) <= MAX_CORE_TOPIC_LENGTH:
        return name
    digest = hashlib.blake2b(first_level.encode("utf-8"), digest_size=_HASH_HEX_DIGITS // 2).hexdigest()
    return f"{ESCAPED_PREFIX}{escaped[:_HEAD_LENGTH]}|{digest}"


def first_level_of(core_topic: str) -> str | None:
    """The MQTT first level a core topic stores, or None if the name is a hashed one (too long to reverse).

    The inverse of `core_topic_of_level` for every name it returns without a hash."""
    if not core_topic.startswith(ESCAPED_PREFIX):
        return core_topic
    escaped = core_topic[len(ESCAPED_PREFIX) :]
    if "|" in escaped:
        return None
    out = bytearray()
    index = 0
    while index < len(escaped):
        char = escaped[index]
        if char == "_":
            out.append(int(escaped[index + 1 : index + 3], 16))
            index += 3
        else:
            out.append(ord(char))
            index += 1
    return out.decode("utf-8")
