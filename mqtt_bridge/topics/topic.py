"""MQTT topic names, topic filters and shared subscriptions (MQTT 3.1.1 section 4.7, MQTT 5.0 sections 4.7 and 4.8).

A topic name is what a PUBLISH carries: levels separated by '/', no wildcards. A topic filter is what a SUBSCRIBE
carries: '+' stands for exactly one level (possibly empty), '#' for any number of trailing levels including none
('sport/#' matches 'sport'). Names whose first character is '$' ('$SYS/...') are reserved for the server and are
not matched by a filter whose first level is a wildcard. `matches` is the plain reference matcher; the tries in
`topic_trie` answer the same question for many filters or names at once.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqtt_bridge.errors import MqttBridgeError

# [MQTT-4.7.3-3]: names and filters are UTF-8 strings with a two-byte length prefix, hence 65,535 bytes at most.
MAX_TOPIC_BYTES = 65_535
LEVEL_SEPARATOR = "/"
SINGLE_LEVEL_WILDCARD = "+"
MULTI_LEVEL_WILDCARD = "#"
# MQTT 5.0 section 4.8.2; many 3.1.1 brokers (mosquitto, EMQX) accept the same prefix, so we do not check the level.
SHARED_PREFIX = "$share/"
# The server's own topics (Mosquitto's $SYS tree): published by the server, never by a client.
SYS_LEVEL = "$SYS"
# Topics an error message shows are cut to this many characters: a 64 KiB name would drown the log line.
_SHOWN_CHARACTERS = 60


class TopicError(MqttBridgeError, ValueError):
    """A topic name, topic filter or shared subscription breaks the MQTT rules; the message says which rule, where."""


@dataclass(slots=True, frozen=True)
class SharedFilter:
    """A parsed SUBSCRIBE topic filter: `group` is the share name of '$share/{group}/{filter}', None if not shared."""

    group: str | None
    filter: str


def validate_topic_name(name: str) -> None:
    """Raise TopicError unless `name` is a legal PUBLISH topic name: 1 to 65,535 UTF-8 bytes, no U+0000, no wildcard."""
    _check_string("topic name", name)
    # [MQTT-3.3.2-2]: the topic name in a PUBLISH must not contain wildcard characters.
    for wildcard in (SINGLE_LEVEL_WILDCARD, MULTI_LEVEL_WILDCARD):
        index = name.find(wildcard)
        if index >= 0:
            raise TopicError(
                f"topic name {_show(name)}: wildcard {wildcard!r} is not allowed in a topic name "
                f"(level {_level_number(name, index)}); wildcards belong in topic filters only"
            )


def validate_topic_filter(topic_filter: str) -> None:
    """Raise TopicError unless `topic_filter` is a legal SUBSCRIBE topic filter (not parsing '$share/')."""
    filter_levels(topic_filter)


def filter_levels(topic_filter: str) -> list[str]:
    """Return the levels of a legal topic filter ('a/+/#' -> ['a', '+', '#']), else raise TopicError.

    The tries use this so that one call validates and splits the filter once.
    """
    _check_string("topic filter", topic_filter)
    levels = topic_filter.split(LEVEL_SEPARATOR)
    if SINGLE_LEVEL_WILDCARD not in topic_filter and MULTI_LEVEL_WILDCARD not in topic_filter:
        return levels
    last = len(levels) - 1
    for number, level in enumerate(levels, start=1):
        if MULTI_LEVEL_WILDCARD in level:
            # [MQTT-4.7.1-2]: '#' on its own or after a '/', and the last character of the filter.
            if level != MULTI_LEVEL_WILDCARD:
                raise TopicError(
                    f"topic filter {_show(topic_filter)}: '#' must be a whole level, found in level {number} "
                    f"{_show(level)}; put a '/' before it"
                )
            if number - 1 != last:
                raise TopicError(f"topic filter {_show(topic_filter)}: '#' must be the last level")
        elif SINGLE_LEVEL_WILDCARD in level and level != SINGLE_LEVEL_WILDCARD:
            # [MQTT-4.7.1-3]: '+' occupies an entire level.
            raise TopicError(
                f"topic filter {_show(topic_filter)}: '+' must be a whole level, found in level {number} "
                f"{_show(level)}; separate it with '/'"
            )
    return levels


def parse_subscription(topic_filter: str) -> SharedFilter:
    """Split a SUBSCRIBE topic filter into share name and filter, validating both; raise TopicError if illegal.

    '$share/{group}/{filter}' gives SharedFilter(group, filter); any other filter gives SharedFilter(None, filter).
    """
    if not topic_filter.startswith(SHARED_PREFIX):
        validate_topic_filter(topic_filter)
        return SharedFilter(None, topic_filter)
    # The length limit and U+0000 apply to the whole string as it travels in the packet.
    _check_string("shared subscription", topic_filter)
    group, separator, inner = topic_filter[len(SHARED_PREFIX) :].partition(LEVEL_SEPARATOR)
    usage = "write '$share/{group}/{filter}'"
    # [MQTT-4.8.2-1], [MQTT-4.8.2-2]: a share name of one character or more, without '/', '+' or '#',
    # followed by '/' and a topic filter.
    if not group:
        raise TopicError(f"shared subscription {_show(topic_filter)}: the share name is empty; {usage}")
    if not separator:
        raise TopicError(
            f"shared subscription {_show(topic_filter)}: no topic filter after the share name {group!r}; {usage}"
        )
    for wildcard in (SINGLE_LEVEL_WILDCARD, MULTI_LEVEL_WILDCARD):
        if wildcard in group:
            raise TopicError(
                f"shared subscription {_show(topic_filter)}: the share name {_show(group)} contains {wildcard!r}; "
                "a share name must not contain '+', '#' or '/'"
            )
    try:
        validate_topic_filter(inner)
    except TopicError as error:
        raise TopicError(f"shared subscription {_show(topic_filter)}: {error}") from None
    return SharedFilter(group, inner)


def first_level(topic: str) -> str:
    """Return the part of `topic` before the first '/' (all of it if there is none; '' for '/a')."""
    return topic.partition(LEVEL_SEPARATOR)[0]


def is_sys_topic(topic: str) -> bool:
    """True for `$SYS` and names under it: the server publishes those, and refuses them from clients (as Mosquitto,
    whose ACL check denies any write to `$SYS`)."""
    return topic.startswith(SYS_LEVEL) and (len(topic) == len(SYS_LEVEL) or topic[len(SYS_LEVEL)] == LEVEL_SEPARATOR)


def matches(topic_filter: str, topic_name: str) -> bool:
    """Return True if the topic filter matches the topic name; both are assumed valid.

    This is the plain reference matcher, level by level; the tries must agree with it.
    """
    filter_parts = topic_filter.split(LEVEL_SEPARATOR)
    name_parts = topic_name.split(LEVEL_SEPARATOR)
    # [MQTT-4.7.2-1]: '$' names are the server's; a filter must spell out their first level to see them.
    if topic_name.startswith("$") and filter_parts[0] in (SINGLE_LEVEL_WILDCARD, MULTI_LEVEL_WILDCARD):
        return False
    for index, level in enumerate(filter_parts):
        if level == MULTI_LEVEL_WILDCARD:
            # Also when the name has run out: '#' includes the parent level ('sport/#' matches 'sport').
            return True
        if index >= len(name_parts):
            return False
        if level != SINGLE_LEVEL_WILDCARD and level != name_parts[index]:
            return False
    return len(filter_parts) == len(name_parts)


def _check_string(what: str, text: str) -> None:
    """The rules names and filters share: [MQTT-4.7.3-1] non-empty, [MQTT-4.7.3-2] no U+0000, [MQTT-4.7.3-3] at
    most 65,535 UTF-8 bytes; and since the string goes into a packet, it must be encodable as UTF-8 at all."""
    if not text:
        raise TopicError(f"{what} is empty; it must be at least one character long")
    if text.isascii():
        size = len(text)
    else:
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as error:
            raise TopicError(
                f"{what} {_show(text)}: U+{ord(text[error.start]):04X} at character {error.start} is a lone "
                "surrogate and cannot be encoded as UTF-8"
            ) from None
    if size > MAX_TOPIC_BYTES:
        raise TopicError(f"{what} {_show(text)}: {size} UTF-8 bytes, at most {MAX_TOPIC_BYTES} are allowed")
    index = text.find("\x00")
    if index >= 0:
        raise TopicError(
            f"{what} {_show(text)}: the null character U+0000 at character {index} "
            f"(level {_level_number(text, index)}) is not allowed"
        )


def _level_number(text: str, index: int) -> int:
    """The 1-based level that character `index` of `text` lies in."""
    return text.count(LEVEL_SEPARATOR, 0, index) + 1


def _show(text: str) -> str:
    """`text` quoted for an error message, cut short if long."""
    if len(text) <= _SHOWN_CHARACTERS:
        return repr(text)
    return repr(text[:_SHOWN_CHARACTERS]) + f"... ({len(text)} characters)"
