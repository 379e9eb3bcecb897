"""The filter registry's changes as core messages of topic MQTT_FILTERS (one queue on every broker group): each group's
node writes them to every group, one at a time and in order, and applies those its own store receives from the
others (before the writer's SEND_OK, so a filter is known to every group's send hook before its SUBACK).

    delta  MQTT_FILTER_GROUP; body {"uses": {queue: [filter, share group]}, "releases": [queue]}: the group
           started or stopped using these queues
    set    MQTT_FILTER_GROUP, MQTT_FILTER_SET=1; body {"uses": {queue: [filter, share group]}}: every queue the
           group uses (replacing what was known of it), sent when its node starts and to a group that says hello
    hello  MQTT_FILTER_GROUP, MQTT_FILTER_HELLO=1: a starting node asks the others for their sets
    claim  MQTT_FILTER_GROUP, MQTT_CLAIM=1; body {"client": client id}: a client connected to the group's node,
           which takes its session over: a node that holds it closes its connection (0x8E) and lets it go
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from core import Message, StoredMessage

FILTERS_TOPIC = "MQTT_FILTERS"
PROPERTY_GROUP = "MQTT_FILTER_GROUP"
PROPERTY_SET = "MQTT_FILTER_SET"
PROPERTY_HELLO = "MQTT_FILTER_HELLO"
PROPERTY_CLAIM = "MQTT_CLAIM"

Uses = dict[str, tuple[str, str | None]]  # light queue -> (filter, share group or None)


@dataclass(frozen=True, slots=True)
class Delta:
    group: str
    uses: Uses = field(default_factory=dict)
    releases: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class GroupSet:
    group: str
    uses: Uses


@dataclass(frozen=True, slots=True)
class Hello:
    group: str


@dataclass(frozen=True, slots=True)
class Claim:
    group: str
    client_id: str


Change = Delta | GroupSet | Hello | Claim


def _uses_json(uses: Uses) -> dict[str, list[str | None]]:
    return {queue: [topic_filter, share] for queue, (topic_filter, share) in uses.items()}


def delta_message(group: str, uses: Uses, releases: list[str]) -> Message:
    body = json.dumps({"uses": _uses_json(uses), "releases": releases}).encode()
    return Message(FILTERS_TOPIC, body, properties={PROPERTY_GROUP: group})


def set_message(group: str, uses: Uses) -> Message:
    body = json.dumps({"uses": _uses_json(uses)}).encode()
    return Message(FILTERS_TOPIC, body, properties={PROPERTY_GROUP: group, PROPERTY_SET: "1"})


def hello_message(group: str) -> Message:
    return Message(FILTERS_TOPIC, b"", properties={PROPERTY_GROUP: group, PROPERTY_HELLO: "1"})


def claim_message(group: str, client_id: str) -> Message:
    # The client id in the body: a property value cannot hold every character an MQTT client id may.
    body = json.dumps({"client": client_id}).encode()
    return Message(FILTERS_TOPIC, body, properties={PROPERTY_GROUP: group, PROPERTY_CLAIM: "1"})


def _uses(data: object) -> Uses:
    if not isinstance(data, dict):
        raise ValueError("'uses' must be an object")
    uses: Uses = {}
    for queue, use in data.items():
        if not (isinstance(use, list) and len(use) == 2 and isinstance(use[0], str)):
            raise ValueError(f"queue {queue!r}: expected [filter, share group]")
        uses[str(queue)] = (use[0], str(use[1]) if use[1] is not None else None)
    return uses


def decode_change(message: Message | StoredMessage) -> Change | None:
    """The change a MQTT_FILTERS message carries, None for a message that is none. Raises ValueError for a malformed
    body (the caller logs it: a record it cannot read must not stop the node)."""
    properties = message.properties
    group = properties.get(PROPERTY_GROUP)
    if not group:
        return None
    if properties.get(PROPERTY_HELLO):
        return Hello(group)
    try:
        data = json.loads(bytes(message.body))
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ValueError("expected an object")
    if properties.get(PROPERTY_CLAIM):
        if not isinstance(data.get("client"), str):
            raise ValueError("a claim's body must be an object with 'client'")
        return Claim(group, data["client"])
    if properties.get(PROPERTY_SET):
        return GroupSet(group, _uses(data.get("uses", {})))
    releases = data.get("releases", [])
    if not isinstance(releases, list) or not all(isinstance(queue, str) for queue in releases):
        raise ValueError("'releases' must be a list of queue names")
    return Delta(group, _uses(data.get("uses", {})), tuple(releases))
