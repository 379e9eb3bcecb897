"""JSON as RocketMQ's Java side writes it (fastjson), for the bodies whose maps are keyed by objects: a
TopicStatsTable's, ConsumeStats's and ResetOffsetBody's `offsetTable` maps a MessageQueue to its figures, written
`{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}`, which is not JSON but is what mqadmin and the Java client read;
and maps keyed by numbers (a route's brokerAddrs from a Java NameServer) are written `{0:"10.0.0.7:10911"}`.

`loads` reads such text: a key that is an object becomes its JSON text (sorted keys, no spaces: what `queue_key`
writes), a number key its digits; everything else as json.loads gives it. JavaJsonError says where it went wrong.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

_SCALARS = json.JSONDecoder()
_WHITESPACE = " \t\n\r"


class JavaJsonError(ValueError):
    """Text that is neither JSON nor fastjson's object- or number-keyed maps."""


def queue_key(topic: str, broker_name: str, queue_id: int) -> str:
    """A MessageQueue as fastjson writes it as a map key: its fields in name order."""
    return json.dumps({"brokerName": broker_name, "queueId": queue_id, "topic": topic}, separators=(",", ":"))


def object_keyed(entries: Iterable[tuple[str, Any]]) -> str:
    """A map whose keys are already-written JSON objects (queue_key), with JSON values."""
    return "{" + ",".join(f"{key}:{json.dumps(value, separators=(',', ':'))}" for key, value in entries) + "}"


def body_with(fields: dict[str, Any], **object_keyed_maps: str) -> bytes:
    """A JSON object of `fields`, plus members whose values are object-keyed maps written by `object_keyed`."""
    members = [f"{json.dumps(name)}:{json.dumps(value, separators=(',', ':'))}" for name, value in fields.items()]
    members += [f"{json.dumps(name)}:{text}" for name, text in object_keyed_maps.items()]
    return ("{" + ",".join(members) + "}").encode()


def loads(data: bytes | str) -> Any:
    """JSON, or fastjson's text with object- or number-keyed maps (see the module docstring)."""
    text = data.decode("utf-8") if isinstance(data, bytes) else data
    value, end = _value(text, _skip(text, 0))
    if _skip(text, end) != len(text):
        raise JavaJsonError(f"unexpected text at character {end}")
    return value


def _skip(text: str, at: int) -> int:
    while at < len(text) and text[at] in _WHITESPACE:
        at += 1
    return at


def _value(text: str, at: int) -> tuple[Any, int]:
    if at >= len(text):
        raise JavaJsonError(f"the text ends at character {at} where a value was expected")
    opening = text[at]
    if opening == "{":
        return _object(text, at + 1)
    if opening == "[":
        return _array(text, at + 1)
    try:
        return _SCALARS.raw_decode(text, at)
    except json.JSONDecodeError as exc:
        raise JavaJsonError(f"no value at character {at}: {exc.msg}") from None


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, dict | list):
        return json.dumps(key, sort_keys=True, separators=(",", ":"))
    return json.dumps(key)


def _object(text: str, at: int) -> tuple[dict[str, Any], int]:
    result: dict[str, Any] = {}

    def member(at: int) -> int:
        key, at = _value(text, _skip(text, at))
        at = _skip(text, at)
        if at >= len(text) or text[at] != ":":
            raise JavaJsonError(f"':' expected at character {at}")
        value, at = _value(text, _skip(text, at + 1))
        result[_key(key)] = value
        return at

    return result, _sequence(text, at, "}", member)


def _array(text: str, at: int) -> tuple[list[Any], int]:
    items: list[Any] = []

    def item(at: int) -> int:
        value, at = _value(text, _skip(text, at))
        items.append(value)
        return at

    return items, _sequence(text, at, "]", item)


def _sequence(text: str, at: int, close: str, read: Callable[[int], int]) -> int:
    """Read comma-separated entries with `read` up to `close`; the position after it."""
    at = _skip(text, at)
    if at < len(text) and text[at] == close:
        return at + 1
    while True:
        at = _skip(text, read(at))
        if at < len(text) and text[at] == ",":
            at += 1
        elif at < len(text) and text[at] == close:
            return at + 1
        else:
            raise JavaJsonError(f"',' or '{close}' expected at character {at}")
