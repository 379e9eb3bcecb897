"""HEART_BEAT's body (RocketMQ's HeartbeatData) read into what the broker keeps, without I/O.

    {"clientID": "...",
     "producerDataSet": [{"groupName": "..."}],
     "consumerDataSet": [{"groupName": "...", "consumeType": ..., "messageModel": ..., "consumeFromWhere": ...,
                          "subscriptionDataSet": [{"topic": "...", "subString": "*", "expressionType": "TAG", ...}],
                          "unitMode": false}]}

Enums come as names from Java and ali-ons (`"CLUSTERING"`) and as ordinals from the C++ client (`1`): both are
read. A body that is not such JSON raises RemotingRequestError naming what was wrong.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from remoting.errors import RemotingRequestError

# Java's enum orders: MessageModel {BROADCASTING, CLUSTERING}; ConsumeType {CONSUME_ACTIVELY, CONSUME_PASSIVELY,
# CONSUME_POP}.
_MESSAGE_MODELS = ("BROADCASTING", "CLUSTERING")
_CONSUME_TYPES = ("CONSUME_ACTIVELY", "CONSUME_PASSIVELY", "CONSUME_POP")
# The producer group every Java client runs for its own sends (MixAll.CLIENT_INNER_PRODUCER_GROUP): no check-backs.
CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"


@dataclass(slots=True, frozen=True)
class SubscriptionData:
    topic: str
    expression_type: str
    expression: str


@dataclass(slots=True, frozen=True)
class ConsumerData:
    group: str
    message_model: str  # BROADCASTING or CLUSTERING
    consume_type: str  # CONSUME_ACTIVELY, CONSUME_PASSIVELY or CONSUME_POP
    subscriptions: tuple[SubscriptionData, ...]


@dataclass(slots=True, frozen=True)
class Heartbeat:
    client_id: str
    producer_groups: tuple[str, ...]
    consumers: tuple[ConsumerData, ...]


def _enum(value: object, names: tuple[str, ...], what: str) -> str:
    if isinstance(value, str) and value in names:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(names):
        return names[value]
    raise RemotingRequestError(f"HEART_BEAT body: {what} {value!r} is none of {', '.join(names)}")


def _text(data: dict[str, Any], name: str, where: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        raise RemotingRequestError(f"HEART_BEAT body: {where} has no {name}")
    return value


def _list(data: dict[str, Any], name: str) -> list[Any]:
    value = data.get(name) or []
    if not isinstance(value, list):
        raise RemotingRequestError(f"HEART_BEAT body: {name} is not a list")
    return value


def read_heartbeat(body: bytes) -> Heartbeat:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RemotingRequestError(f"HEART_BEAT body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise RemotingRequestError("HEART_BEAT body is not a JSON object")
    client_id = _text(data, "clientID", "the heartbeat")
    producers = []
    for producer in _list(data, "producerDataSet"):
        if not isinstance(producer, dict):
            raise RemotingRequestError("HEART_BEAT body: a producerDataSet entry is not an object")
        group = _text(producer, "groupName", "a producer")
        if group != CLIENT_INNER_PRODUCER_GROUP:
            producers.append(group)
    consumers = []
    for consumer in _list(data, "consumerDataSet"):
        if not isinstance(consumer, dict):
            raise RemotingRequestError("HEART_BEAT body: a consumerDataSet entry is not an object")
        group = _text(consumer, "groupName", "a consumer")
        subscriptions = []
        for item in _list(consumer, "subscriptionDataSet"):
            if not isinstance(item, dict):
                raise RemotingRequestError(f"HEART_BEAT body: a subscription of group {group!r} is not an object")
            expression = item.get("subString")
            subscriptions.append(
                SubscriptionData(
                    _text(item, "topic", f"a subscription of group {group!r}"),
                    str(item.get("expressionType") or "TAG"),
                    expression if isinstance(expression, str) else "*",
                )
            )
        consumers.append(
            ConsumerData(
                group,
                _enum(consumer.get("messageModel", "CLUSTERING"), _MESSAGE_MODELS, "messageModel"),
                _enum(consumer.get("consumeType", "CONSUME_PASSIVELY"), _CONSUME_TYPES, "consumeType"),
                tuple(subscriptions),
            )
        )
    return Heartbeat(client_id, tuple(producers), tuple(consumers))
