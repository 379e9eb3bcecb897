"""Moving a parked message to where it really goes, at most once even across a crash.

The broker parks messages in its own topics (delay levels, timers, transactional half messages, retries) and
later appends a copy to the real topic. A service persists how far it got only now and then, so after a crash
it may meet a message it had already moved. The copy names its source record (PROPERTY_MOVED_FROM, the source's
commit-log offset) and keeps the source's unique id, which the index holds for every record: `already_moved`
finds the copy through the index instead of moving the message a second time. Services ask only for the few
messages a crash leaves in doubt (those after their last persisted progress), never for every message.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Protocol

from core.errors import CoreError, ServiceNotAvailableError
from core.results import SendResult
from core.store.errors import CorruptRecordError
from core.store.message import INTERNAL_PROPERTIES, Message, StoredMessage
from core.store.message_store import MessageStore
from core.system_topics import PROPERTY_MOVED_FROM, PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC

log = logging.getLogger(__name__)

# The copy is stored after its source; a store clock that stepped back a little must not hide it.
CLOCK_SLACK_MS = 60_000
# Copies of one unique id looked at, at most (a producer that reuses ids could have many).
MAX_COPIES_LOOKED_AT = 64


class MovingBroker(Protocol):
    """The broker as a service that moves messages sees it (core.broker.Broker is one): it stores the copies."""

    async def store_moved(self, message: Message) -> SendResult:
        """Store a moved message as a send would, without parking it again."""
        ...

    async def store_moved_batch(self, messages: Sequence[Message]) -> list[SendResult]:
        """`store_moved` for several messages of one topic and queue."""
        ...


def moved_copy(parked: StoredMessage, drop: Iterable[str] = ()) -> Message:
    """The message `parked` stands for: its real topic and queue back, the parking properties and `drop` removed,
    the source named. Body, flags, born time and host, reconsume times and the unique id stay as they were."""
    properties = {
        name: value
        for name, value in parked.properties.items()
        if name not in INTERNAL_PROPERTIES and name not in (PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID)
    }
    for name in drop:
        properties.pop(name, None)
    properties[PROPERTY_MOVED_FROM] = str(parked.commit_log_offset)
    return Message(
        topic=parked.properties.get(PROPERTY_REAL_TOPIC, parked.topic),
        body=parked.body,
        queue_id=int(parked.properties.get(PROPERTY_REAL_QUEUE_ID, "0")),
        properties=properties,
        flag=parked.flag,
        sys_flag=parked.sys_flag,
        born_timestamp=parked.born_timestamp,
        born_host=parked.born_host,
        reconsume_times=parked.reconsume_times,
    )


def already_moved(store: MessageStore, source: StoredMessage, topic: str) -> bool:
    """True if `topic` holds a copy made from the record `source` (by moved_copy), as the index says. The store
    must have dispatched everything appended before the question (MessageStore.wait_dispatched)."""
    unique_id = source.unique_id
    if not unique_id:
        return False
    mark = str(source.commit_log_offset)
    copies = store.query_messages(topic, unique_id, MAX_COPIES_LOOKED_AT, source.store_timestamp - CLOCK_SLACK_MS)
    return any(copy.properties.get(PROPERTY_MOVED_FROM) == mark for copy in copies)


def read_parked(store: MessageStore, commit_log_offsets: Iterable[int], service: str) -> list[StoredMessage]:
    """The parked records at `commit_log_offsets`; one that cannot be read (removed by retention, corrupt) is
    logged as lost and left out."""
    parked = []
    for offset in commit_log_offsets:
        try:
            parked.append(store.read_message(offset))
        except (LookupError, CorruptRecordError) as exc:
            log.error("%s: the parked message at commit-log offset %d is lost: %s", service, offset, exc)
    return parked


async def store_copies(broker: MovingBroker, copies: Sequence[Message]) -> list[SendResult | CoreError]:
    """Store `copies` in order through `broker.store_moved_batch`, consecutive copies of one topic and queue in one
    batch. A batch refused as a whole is tried one copy at a time, so one copy that cannot be stored (its topic
    deleted, too large) does not hold back the others. Returns, per copy, its send result or the error that
    refused it. A store that refuses writes (ServiceNotAvailableError) refuses that copy and every later one."""
    outcomes: list[SendResult | CoreError] = []
    start = 0
    while start < len(copies):
        first = copies[start]
        end = start + 1
        while end < len(copies) and (copies[end].topic, copies[end].queue_id) == (first.topic, first.queue_id):
            end += 1
        group = copies[start:end]
        try:
            outcomes.extend(await broker.store_moved_batch(group))
        except ServiceNotAvailableError as exc:
            outcomes.extend([exc] * (len(copies) - start))
            return outcomes
        except CoreError:
            for copy in group:
                try:
                    outcomes.append(await broker.store_moved(copy))
                except ServiceNotAvailableError as exc:
                    outcomes.extend([exc] * (len(copies) - len(outcomes)))
                    return outcomes
                except CoreError as exc:
                    outcomes.append(exc)
        start = end
    return outcomes
