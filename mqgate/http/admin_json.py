"""How the admin HTTP API reads requests and writes answers: JSON bodies and query parameters checked with the
field named, core errors turned into HTTP statuses, and the JSON form of topics' permissions, times and messages.

Core errors map as their meaning says (core/errors.py): "no such thing" (LookupError) 404, "your input is wrong"
(ValueError) 400, live consumers in the way 409, no permission 403, the store refusing writes 503, anything else
500. Message bodies are shown as text when they are UTF-8 and as base64 otherwise (`body_encoding` says which).
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from aiohttp import web

from core import (
    ConsumersOnlineError,
    CoreError,
    GroupNotFoundError,
    NoPermissionError,
    Perm,
    ServiceNotAvailableError,
    StoredMessage,
    TopicNotFoundError,
)
from eventbridge.errors import ReprocessError
from eventbridge.time_range import format_ms, parse_time_ms
from mqtt_bridge.topics.topic_mapping import core_topic_of

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
# Bytes of a body shown in a list of messages; a message's own page shows it whole.
SUMMARY_BODY_BYTES = 256


def refusal(exc: CoreError) -> web.HTTPException:
    if isinstance(exc, LookupError):
        return web.HTTPNotFound(text=str(exc) + not_found_hint(exc))
    if isinstance(exc, ConsumersOnlineError):
        return web.HTTPConflict(text=str(exc))
    if isinstance(exc, NoPermissionError):
        return web.HTTPForbidden(text=str(exc))
    if isinstance(exc, ServiceNotAvailableError):
        return web.HTTPServiceUnavailable(text=str(exc))
    if isinstance(exc, ValueError):
        return web.HTTPBadRequest(text=str(exc))
    return web.HTTPInternalServerError(text=str(exc))


def not_found_hint(exc: CoreError) -> str:
    """What to try after a 404 for a topic or group: the command that lists them, and for a topic that is an MQTT
    topic's name, the core topic its messages are stored in (`Gerät` -> `%MQTT%Ger_C3_A4t`)."""
    if isinstance(exc, TopicNotFoundError):
        hint = "; `mqgate admin topic list` lists the topics"
        if exc.topic and (stored := _core_topic_of_mqtt(exc.topic)) not in (None, exc.topic):
            hint += f"; messages published over MQTT to {exc.topic!r} are stored in the core topic {stored!r}"
        return hint
    if isinstance(exc, GroupNotFoundError):
        return "; `mqgate admin group list` lists the groups"
    return ""


def _core_topic_of_mqtt(name: str) -> str | None:
    if not name or any(char in name for char in "+#\0"):  # not an MQTT topic name
        return None
    return core_topic_of(name)


def core_errors(handler: Handler) -> Handler:
    """`handler`, with the core's errors answered as `refusal` says."""

    async def answer(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except CoreError as exc:
            raise refusal(exc) from None

    return answer


def add_core_routes(app: web.Application, routes: Sequence[tuple[str, str, Handler]]) -> None:
    """(method, path, handler) routes, each answering the core's errors as `refusal` says."""
    for method, path, handler in routes:
        app.router.add_route(method, path, core_errors(handler))


def optional_int(source: dict[str, Any], field: str, low: int = 0, high: int | None = None) -> int | None:
    value = source.get(field)
    if value is None:
        return None
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < low or (high is not None and value > high):
        bound = f"{low} to {high}" if high is not None else f"at least {low}"
        raise web.HTTPBadRequest(text=f"{field!r}: {value!r} is not an integer {bound}")
    return value


def optional_bool(source: dict[str, Any], field: str) -> bool | None:
    value = source.get(field)
    if value is None or isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise web.HTTPBadRequest(text=f"{field!r}: {value!r} is not true or false")


def required_string(source: dict[str, Any], field: str) -> str:
    value = source.get(field)
    if not isinstance(value, str) or not value:
        raise web.HTTPBadRequest(text=f"{field!r}: give a non-empty string")
    return value


def time_ms(source: dict[str, Any], field: str, default: int) -> int:
    value = source.get(field)
    if value is None or value == "":
        return default
    try:
        return parse_time_ms(value, field)
    except ReprocessError as exc:
        raise web.HTTPBadRequest(text=str(exc)) from None


def when(timestamp_ms: int | None) -> str | None:
    return None if timestamp_ms is None else format_ms(timestamp_ms)


# --- permissions -------------------------------------------------------------------------------------------

_PERM_LETTERS = (("r", Perm.READ), ("w", Perm.WRITE), ("i", Perm.INHERIT))


def perm_text(perm: Perm) -> str:
    """ "rw" for read and write (RocketMQ's 6), "r" read only (4), "w" write only (2), "" neither; "i" inherit."""
    return "".join(letter for letter, bit in _PERM_LETTERS if perm & bit)


def parse_perm(value: object, field: str = "perm") -> Perm:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 7:
        return Perm(value)
    if isinstance(value, str) and all(char in "rwi" for char in value) and len(set(value)) == len(value):
        perm = Perm(0)
        for letter, bit in _PERM_LETTERS:
            if letter in value:
                perm |= bit
        return perm
    raise web.HTTPBadRequest(
        text=f"{field!r}: {value!r} is not a permission; give letters of r (read), w (write), i (inherit), e.g. "
        '"rw", or RocketMQ\'s number (6 = read and write, 4 = read only, 2 = write only)'
    )


# --- messages ----------------------------------------------------------------------------------------------


def _body(body: bytes, limit: int | None) -> dict[str, object]:
    shown = body if limit is None else body[:limit]
    try:
        body.decode()
    except UnicodeDecodeError:
        text, encoding = base64.b64encode(shown).decode(), "base64"
    else:  # a cut may fall inside a character: its bytes are left out
        text, encoding = shown.decode(errors="ignore"), "text"
    return {"body": text, "body_encoding": encoding, "body_size": len(body), "body_truncated": len(shown) < len(body)}


def message_json(message: StoredMessage, body_limit: int | None = SUMMARY_BODY_BYTES) -> dict[str, object]:
    """A stored message as the admin API shows it; `body_limit` None: the whole body."""
    return {
        "msg_id": message.unique_id,
        "offset_msg_id": message.offset_msg_id,
        "topic": message.topic,
        "queue_id": message.queue_id,
        "queue_offset": message.queue_offset,
        "commit_log_offset": message.commit_log_offset,
        "tags": message.tags,
        "keys": message.keys,
        "store_timestamp_ms": message.store_timestamp,
        "store_time": when(message.store_timestamp),
        "born_timestamp_ms": message.born_timestamp,
        "born_host": f"{message.born_host[0]}:{message.born_host[1]}",
        "store_host": f"{message.store_host[0]}:{message.store_host[1]}",
        "reconsume_times": message.reconsume_times,
        "properties": dict(message.properties),
        **_body(bytes(message.body), body_limit),
    }
