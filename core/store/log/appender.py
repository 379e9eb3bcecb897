"""The store's append path (MessageStore.append and append_batch): a message checked, the part of its record that
does not depend on where it lands encoded, the commit log asked to place it, the dispatcher woken if it sleeps,
and the answer as a PutResult.

Every message of every front door goes through here, so this module is compiled (pyproject.toml [tool.mqgate]
compiled). Messages come from callers: their fields are read untyped (`Any`) and checked here, so that a field of
the wrong type gets the store's own refusal (InvalidMessageError, InvalidTopicError), compiled or not, and never a
TypeError from a compiled module's own type checks.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from core.store.errors import InvalidMessageError, MessageTooLargeError, StoreNotWritableError
from core.store.log.commit_log import CommitLog, Record
from core.store.log.property_codec import encode_properties, entry_code
from core.store.log.record_codec import HEADER_SIZE, encode_tail, encode_topic
from core.store.message import (
    LIGHT_QUEUE_PREFIX,
    MULTI_DISPATCH_SEPARATOR,
    PROPERTY_KEYS,
    PROPERTY_MULTI_DISPATCH,
    PROPERTY_TAG_CODE,
    PROPERTY_UNIQ_KEY,
    Message,
    is_light_queue,
)
from core.store.put_result import PutResult, PutStatus
from core.store.queues.dispatcher import Dispatcher
from core.store.topic_name import validate_topic

# Checked light-queue lists remembered, at most (then forgotten all at once). Sized for tens of thousands of
# distinct lists (an EventBridge bus with 10,000 targets routes to 10,000 one-queue lists): at 4,096 such a bus
# missed nearly always, and a miss splits and checks the list again. A few MB at most.
MAX_LIGHT_LISTS: Final = 65_536
# A consume-queue entry's tag code is a signed 64-bit integer.
_INT64: Final = re.compile(r"-?[0-9]{1,18}")


class Appender:
    """Appends for one store. `refusal` is why appends are refused right now (None: they are taken); the store
    sets it as it opens, closes and meets full disks or failed flushes."""

    def __init__(
        self,
        commit_log: CommitLog,
        dispatcher: Dispatcher,
        max_message_size: int,
        store_host: tuple[str, int],
        store_dir: str,
    ) -> None:
        self.commit_log = commit_log
        self.dispatcher = dispatcher
        self.max_message_size = max_message_size
        self.store_host = store_host
        self.store_dir = store_dir
        self.refusal: str | None = "the store is not open"
        # Each topic's encoded name (encode_topic), checked once.
        self.topics: dict[str, bytes] = {}
        # Light-queue lists (the INNER_MULTI_DISPATCH value) already checked, split and deduplicated: a front door
        # names the same few lists again and again (the MQTT gateway: one per topic with its matching filters).
        self.light_lists: dict[str, tuple[str, ...]] = {}

    def prepare(self, message: Message) -> Record:
        """Check a message and encode what of its record does not depend on where it lands, as CommitLog.append
        takes it (Record). Raises as `append` does. The fields it needs are read here once: each read of an
        interpreted object's attribute is a lookup."""
        fields: Any = message
        topic: Any = fields.topic
        topic_part = self.topics.get(topic) if type(topic) is str else None
        if topic_part is None:
            topic_part = encode_topic(validate_topic(topic).encode())
            self.topics[topic] = topic_part
        body: Any = fields.body
        if type(body) is not bytes:
            if not isinstance(body, (bytes, bytearray, memoryview)):
                raise InvalidMessageError(f"topic {topic!r}: body must be bytes, not {type(body).__name__}")
            body = bytes(body)
        queue_id: Any = fields.queue_id
        if not isinstance(queue_id, int):
            raise InvalidMessageError(f"topic {topic!r}: queue id must be an integer, not {type(queue_id).__name__}")
        if queue_id < 0:
            raise InvalidMessageError(f"topic {topic!r}: queue id {queue_id} is negative")
        properties: Any = fields.properties
        tail = encode_tail(topic_part, encode_properties(properties) if properties else b"")
        if HEADER_SIZE + len(body) + len(tail) > self.max_message_size:
            raise MessageTooLargeError(
                f"topic {topic!r}: message of {len(body) + len(tail)} bytes (body and properties) is over"
                f" max_message_size {self.max_message_size}"
            )
        if not properties:
            return message, topic, queue_id, body, tail, (), 0, None, None
        # Every name and value is a string now: encode_properties refuses anything else.
        given: Any = properties.get(PROPERTY_TAG_CODE)
        if given is not None and not _INT64.fullmatch(given):
            raise InvalidMessageError(
                f"topic {topic!r}: property {PROPERTY_TAG_CODE} must be a decimal integer, not {given[:40]!r}"
            )
        light: Any = properties.get(PROPERTY_MULTI_DISPATCH)
        return (
            message,
            topic,
            queue_id,
            body,
            tail,
            self.light_queues(light) if light else (),
            entry_code(properties),
            properties.get(PROPERTY_KEYS),
            properties.get(PROPERTY_UNIQ_KEY),
        )

    def light_queues(self, names: str) -> tuple[str, ...]:
        """The light queues a INNER_MULTI_DISPATCH value names, each once, checked."""
        queues = self.light_lists.get(names)
        if queues is not None:
            return queues
        queues = tuple(dict.fromkeys(names.split(MULTI_DISPATCH_SEPARATOR)))
        for name in queues:
            # Checked even when the name is a known topic: an entry of a normal topic's queue 0 made here would
            # hand that topic's consumers another topic's record.
            if not is_light_queue(name):
                raise InvalidMessageError(
                    f"property {PROPERTY_MULTI_DISPATCH}: {name!r} is not a light queue name; such names"
                    f" start with {LIGHT_QUEUE_PREFIX!r}"
                )
            if name not in self.topics:
                self.topics[name] = encode_topic(validate_topic(name).encode())
        if len(self.light_lists) >= MAX_LIGHT_LISTS:
            self.light_lists.clear()
        self.light_lists[names] = queues
        return queues

    def append(self, message: Message) -> PutResult:
        """Append without waiting for the disk (the record is in the page cache and will be dispatched).

        Raises InvalidTopicError / InvalidMessageError / MessageTooLargeError for bad input and
        StoreNotWritableError when writes are refused; nothing is written then.
        """
        if self.refusal is not None:
            raise StoreNotWritableError(f"store {self.store_dir}: {self.refusal}")
        record = self.prepare(message)
        offset, size, queue_offset, stamp = self.commit_log.append(record)
        dispatcher = self.dispatcher
        if dispatcher.sleeping:
            dispatcher.wake_sleeping()
        return PutResult(PutStatus.PUT_OK, record[1], record[2], queue_offset, offset, size, stamp, self.store_host)

    def append_batch(self, messages: Iterable[Message]) -> list[PutResult]:
        """`append` for several messages in one go: all are checked and encoded before any is written, so a bad
        one refuses the whole batch and nothing is written; then one commit-log call lays them down in order."""
        if self.refusal is not None:
            raise StoreNotWritableError(f"store {self.store_dir}: {self.refusal}")
        records = [self.prepare(message) for message in messages]
        placed = self.commit_log.append_batch(records)
        dispatcher = self.dispatcher
        if dispatcher.sleeping:
            dispatcher.wake_sleeping()
        host = self.store_host
        ok = PutStatus.PUT_OK
        results: list[PutResult] = []
        for record, (offset, size, queue_offset, stamp) in zip(records, placed, strict=True):
            results.append(PutResult(ok, record[1], record[2], queue_offset, offset, size, stamp, host))
        return results
