"""The per-message work of a batch send (Broker.send_batch, RocketMQ's batch): the checks of the batch, the light
queues its send hooks name and the unique ids, then a SendResult for each stored message.

Every message the MQTT gateway and the EventBridge buses publish goes through here, so this module is compiled
(pyproject.toml [tool.mqgate] compiled). Messages come from callers: fields the checks read are read untyped
(`Any`), so a field of the wrong type gets the same answer compiled or not.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from core.errors import IllegalMessageError, PayloadTooLargeError
from core.message_queue import MessageQueue
from core.results import SendResult, SendStatus
from core.send_hooks import SendHook, name_light_queues
from core.store.message import PROPERTY_UNIQ_KEY, Message
from core.store.put_result import PutResult
from core.system_topics import PARKING_PROPERTIES

# RocketMQ's limit on a batch's bodies together.
MAX_BATCH_BYTES: Final = 4 * 1024 * 1024


def refuse_parked(messages: Sequence[Message]) -> None:
    """A batch holds no delayed, timer or transactional message: IllegalMessageError otherwise."""
    for message in messages:
        properties: Any = message.properties
        if properties and not PARKING_PROPERTIES.isdisjoint(properties):
            raise IllegalMessageError(
                "a batch cannot hold delayed, timer or transactional messages (a message has"
                f" {', '.join(sorted(PARKING_PROPERTIES & properties.keys()))}); send them one by one"
            )


def batch_bytes(messages: Sequence[Message]) -> int:
    """The bodies' total size, once the batch is known to be one topic and queue and within MAX_BATCH_BYTES."""
    first: Any = messages[0]
    topic = first.topic
    queue_id = first.queue_id
    total = 0
    for message in messages:
        fields: Any = message
        if fields.topic != topic or fields.queue_id != queue_id:
            raise IllegalMessageError("a batch holds messages of one topic and one queue")
        total += len(fields.body)
    if total > MAX_BATCH_BYTES:
        raise PayloadTooLargeError(f"batch of {total} bytes is over the {MAX_BATCH_BYTES}-byte limit")
    return total


def name_queues_and_ids(messages: Sequence[Message], ids: list[str], hooks: Sequence[SendHook]) -> None:
    """Each message's light queues (core.send_hooks.name_light_queues) into the property the store dispatches by,
    and a unique id from `ids` unless it has one."""
    for message, unique_id in zip(messages, ids, strict=True):
        name_light_queues(message, hooks)
        properties: Any = message.properties
        properties.setdefault(PROPERTY_UNIQ_KEY, unique_id)


def send_results(messages: Iterable[Message], puts: list[PutResult], queue: MessageQueue) -> list[SendResult]:
    """SEND_OK results of stored messages (their unique ids, where the store put them)."""
    ok = SendStatus.SEND_OK
    results: list[SendResult] = []
    for message, put in zip(messages, puts, strict=True):
        properties: Any = message.properties
        results.append(
            SendResult(
                ok, properties[PROPERTY_UNIQ_KEY], queue, put.queue_offset, put.commit_log_offset, put.store_host
            )
        )
    return results
