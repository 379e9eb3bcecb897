"""Event buses stored in core topics: how an event is written as a core message and read back.

A bus `B` is the core topic `%EVENTBUS%B` with BUS_QUEUES queues. An event is stored once, in its structured
CloudEvents JSON form (the dict `event_form.event_as_json` gives), as the message body:

    body        UTF-8 JSON of the event (attributes and extensions at the top, `data` or `data_base64`)
    keys        the event id, so `mqgate` can find an event by id through the core's index
    tags        the event type, so a core consumer can filter on it with a tag expression
    properties  EB_ONLY_RULE / EB_ONLY_TARGET on a replayed or redriven copy meant for one rule (and target), and
                on a scheduled rule's event (EB_ONLY_RULE)

Appending is durable before `put` returns under the store's flush mode, as for any core message: an event is
acknowledged to its producer only after that. The router (router.py) gives each event, as it is appended, an entry in
the delivery queue of every target whose rule matches it; targets read those queues, not the bus topic. The router's
send hook runs inside `put`'s send and gets each event as it was put, with its message (`event_being_put`): the
event is encoded once, for the store, and not decoded again on its way there.
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, TypeGuard

import orjson

from core import MAX_BATCH_BYTES, Broker, Message, Producer, SendResult, SendStatus, StoredMessage
from eventbridge.errors import EventBridgeError
from eventbridge.rules.model import DEFAULT_BUS

BUS_TOPIC_PREFIX = "%EVENTBUS%"
# RocketMQ's default queue count: it spreads a bus over consume-queue files.
BUS_QUEUES = 4
# A bus that was never given a dead-letter topic sends there: nothing is dropped without a trace.
DEFAULT_DEAD_LETTER_PREFIX = "%EVENTBUS-DLQ%"

# What a message adds to its body in the core's batch size count, generously (properties, topic, header).
BATCH_OVERHEAD_BYTES = 1024
BATCH_BUDGET_BYTES = MAX_BATCH_BYTES // 2

# The CloudEvents extension a replayed copy carries: its replay's name (archives/replay.py). Extension names are
# [a-z0-9]{1,20}.
REPLAY_NAME_EXTENSION = "replayname"
PROPERTY_ONLY_RULE = "EB_ONLY_RULE"  # "<bus>/<rule>": only this rule delivers the copy (replay, redrive, schedule)
PROPERTY_ONLY_TARGET = "EB_ONLY_TARGET"  # with EB_ONLY_RULE: only this target of the rule (redrive)


class BusError(EventBridgeError):
    """A bus that does not exist, or an event that cannot be stored."""


def bus_topic(bus: str) -> str:
    return BUS_TOPIC_PREFIX + bus


def default_dead_letter_topic(bus: str) -> str:
    return DEFAULT_DEAD_LETTER_PREFIX + bus


def bus_of_topic(topic: str) -> str | None:
    return topic[len(BUS_TOPIC_PREFIX) :] if topic.startswith(BUS_TOPIC_PREFIX) else None


# json.dumps with options builds an encoder per call; this one is built once (the same options, the same bytes).
_encode_json = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode


def encode_event(event: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON. orjson writes it in a tenth of the stdlib's time; an integer past 64 bits (which JSON
    allows and orjson does not take) falls back to the stdlib."""
    try:
        return orjson.dumps(event)
    except TypeError:
        return _encode_json(event).encode()


def decode_event(body: bytes) -> dict[str, Any]:
    """The event of a bus message. Raises BusError for a body that is not a JSON object with an id (a message
    someone sent to the bus topic by hand). An event is decoded once where it comes back out of the store (a target's
    task reading its queue, an archive, a replay, a redrive, a dead letter listed), and by the router only when it
    was sent otherwise than by EventBuses.put (event_being_put); ingress decodes the request, never a body. orjson
    reads it in a third of the stdlib's time. NaN and Infinity, which the stdlib would take, are refused, as
    PutEvents and sources refuse them."""
    try:
        # orjson reads an integer past 64 bits as a float, silently: a body with such a run of digits (or a long
        # number or digit string, which cost nothing to read the slow way) goes to the stdlib.
        event = orjson.loads(body) if _LONG_DIGITS not in body.translate(_DIGITS_AS_ZERO) else _stdlib_decode(body)
    except (UnicodeDecodeError, ValueError) as exc:  # orjson.JSONDecodeError is a ValueError
        raise BusError(f"not a CloudEvent in JSON: {exc}") from None
    if not isinstance(event, dict) or not isinstance(event.get("id"), str):
        raise BusError("not a CloudEvent in JSON: expected an object with a string 'id'")
    return event


# Integers orjson reads exactly have at most 19 digits (2**64 - 1 has 20, but -2**63 - 1 has 19 and overflows). A run
# of 19 digits is found as 19 zeros once every digit reads as a zero: a tenth of the time a regular expression took
# (3 us of a 4 us decode).
_LONG_DIGITS = b"0" * 19
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")


def _stdlib_decode(body: bytes) -> Any:
    return json.loads(body, parse_constant=_refuse_constant)


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


# The events EventBuses.put is sending, by message (id, and the message itself to check it is the same), while it
# sends them. The core calls a send hook with the message alone: the router's hook (router.py) finds the event here
# rather than decode the body it was just encoded into. A context variable, set around one put: only the hooks
# that put's sends run see it (a put in another task has its own).
_BEING_PUT: ContextVar[Mapping[int, tuple[Message, dict[str, Any]]] | None] = ContextVar(
    "eventbridge_bus_events_being_put", default=None
)


def event_being_put(message: Message) -> dict[str, Any] | None:
    """The event of `message` when EventBuses.put is sending it, equal to what decode_event reads from its body;
    None when the body must be decoded (a message sent otherwise, or an event that would not read back alike)."""
    being_put = _BEING_PUT.get()
    if being_put is None:
        return None
    found = being_put.get(id(message))
    return found[1] if found is not None and found[0] is message else None


def reads_back_alike(event: Mapping[str, Any], body: bytes) -> TypeGuard[dict[str, Any]]:
    """Whether decode_event(body) gives `event` again, for `body` = encode_event(event) and an event of JSON values
    (as a JSON reader gives them: PutEvents, sources, events read from a bus). Not when decode_event would refuse
    it (not an object with a string id), nor when orjson wrote a number past the float range (1e400, which Python's
    json reads as infinity) as null: telling that null from a real one would cost a walk over the event, so an
    event with any null in its body is decoded, as before."""
    return isinstance(event, dict) and isinstance(event.get("id"), str) and b"null" not in body


class StoredEvent(Protocol):
    """What selecting events for a replay or an archive needs of a message of a bus (core.StoredMessage has it)."""

    @property
    def body(self) -> bytes: ...
    @property
    def properties(self) -> dict[str, str]: ...
    @property
    def store_timestamp(self) -> int: ...


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class OnlyFor:
    """Restricts a copy of an event to one rule, and optionally one of its targets."""

    rule: str  # "<bus>/<rule name>"
    target: str | None = None

    def properties(self) -> dict[str, str]:
        found = {PROPERTY_ONLY_RULE: self.rule}
        if self.target is not None:
            found[PROPERTY_ONLY_TARGET] = self.target
        return found

    @staticmethod
    def of(message_properties: Mapping[str, str]) -> OnlyFor | None:
        rule = message_properties.get(PROPERTY_ONLY_RULE)
        if rule is None:
            return None
        return OnlyFor(rule, message_properties.get(PROPERTY_ONLY_TARGET))


class EventBuses:
    """Creates buses (their topics) and appends events to them."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.producer = Producer(broker, "eventbridge-ingress")

    def create(self, bus: str) -> None:
        topic = bus_topic(bus)
        if not self.broker.has_topic(topic):
            self.broker.create_topic(topic, BUS_QUEUES)

    def delete(self, bus: str) -> bool:
        if bus == DEFAULT_BUS:
            raise BusError(f"bus {DEFAULT_BUS!r} always exists; it cannot be deleted")
        return self.broker.delete_topic(bus_topic(bus))

    def exists(self, bus: str) -> bool:
        return self.broker.has_topic(bus_topic(bus))

    def names(self) -> list[str]:
        names = (bus_of_topic(config.topic_name) for config in self.broker.topic_configs())
        return sorted(name for name in names if name is not None)

    async def put(
        self, bus: str, events: Sequence[Mapping[str, Any]], only_for: OnlyFor | None = None
    ) -> list[SendResult]:
        """Append events (structured JSON form) in order, one batch; an event without `time` is stamped now.
        Returns once they are durable under the flush mode; raises BusError for a bus that does not exist.

        Each event is encoded once, for the store. The router's send hook gets the event itself with its message
        (event_being_put), not the body to decode again; a copy restricted by `only_for` is routed unread."""
        if not events:
            return []
        if not self.exists(bus):
            raise BusError(f"bus {bus!r} does not exist; create it first (POST /buses)")
        topic = bus_topic(bus)
        properties = only_for.properties() if only_for is not None else None
        stamp = now_rfc3339()
        messages = []
        being_put: dict[int, tuple[Message, dict[str, Any]]] = {}
        for event in events:
            if "time" not in event:
                event = {**event, "time": stamp}
            body = encode_event(event)
            message = self.producer.message(
                topic,
                body,
                keys=[str(event["id"])],
                tags=str(event.get("type") or "") or None,
                properties=properties,
            )
            messages.append(message)
            if only_for is None and reads_back_alike(event, body):
                being_put[id(message)] = (message, event)
        results: list[SendResult] = []
        token = _BEING_PUT.set(being_put)
        try:
            for chunk in _chunks(messages):
                queue_id = chunk[0].queue_id
                for message in chunk:
                    message.queue_id = queue_id
                results += await self.broker.send_batch(chunk)
        finally:
            _BEING_PUT.reset(token)
        failed = [result for result in results if result.status is not SendStatus.SEND_OK]
        if failed:
            raise BusError(
                f"bus {bus!r}: {len(failed)} event(s) not confirmed as stored ({failed[0].status.name}: in the"
                " broker's log, not yet on disk or on a slave)"
            )
        return results


def _chunks(messages: list[Message]) -> list[list[Message]]:
    """Batches under the core's 4 MiB batch limit (a batch of 256 KiB events may be larger)."""
    chunks: list[list[Message]] = [[]]
    size = 0
    for message in messages:
        length = len(message.body) + BATCH_OVERHEAD_BYTES
        if chunks[-1] and size + length > BATCH_BUDGET_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(message)
        size += length
    return chunks


def event_of(message: StoredMessage) -> dict[str, Any]:
    return decode_event(message.body)
