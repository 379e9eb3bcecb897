"""Looking stored messages up, as RocketMQ's admin tools do (queryMsgById, queryMsgByUniqueKey, queryMsgByKey):
by the offset message id, by the unique id within a topic, and by a key within a time range. The admin CLI reaches
these through `Broker.queries`.

- An offset message id names where a record is (store host and port, commit-log offset): it is decoded and the
  record read, with no index. The record must say it was stored by the host and port the id names, so an id from
  another broker is refused rather than answered with whatever this log holds at that offset.
- A unique id (UNIQ_KEY) and a key (KEYS) are found through the index files, which hold "topic#key": the topic is
  part of the question, as in RocketMQ. One unique id can name several records: a consumer group's retry and
  dead-letter copies keep it, and so does a dead letter resent to its topic, so the user can follow a message.
- A query by key returns at most MAX_QUERY_COUNT messages stored in [begin_ms, end_ms], newest first; a query by
  time range alone, the first MAX_QUERY_COUNT stored in the range, oldest first.

Every message is returned as consumers see it (core.compression.decode_for_consumer: the body decompressed), with
its properties, store time, queue, queue offset and commit-log offset (StoredMessage). The dispatcher indexes a
message a moment after it is stored: one sent a millisecond ago may not be found yet (Broker.wait_visible).
A message's consumption state for a group is core.consume_state's; `track` here finds the records it needs.
"""

from __future__ import annotations

import re
from typing import Protocol

from core.compression import decode_for_consumer
from core.consume_state import GroupProgress, MessageTrack, track_records
from core.errors import IllegalArgumentError, MessageNotFoundError, TopicNotFoundError, from_store_error
from core.moves import CLOCK_SLACK_MS
from core.store.errors import CorruptRecordError, StoreError
from core.store.message import StoredMessage
from core.store.message_id import decode_offset_msg_id
from core.store.message_store import END_OF_TIME_MS, MessageStore
from core.system_topics import (
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    SCHEDULE_TOPIC,
    TIMER_TOPIC,
    dlq_topic,
    retry_topic,
)
from core.tables.subscription_group import validate_group
from core.tables.topic_config import TopicConfig

# RocketMQ's maxMsgsNumBatch: the broker answers a query by key with at most 64 messages; its tools ask for 64 and
# its client defaults to 32 (defaultQueryMaxNum).
MAX_QUERY_COUNT = 64
DEFAULT_QUERY_COUNT = 32
# Records of one unique id looked at per topic. A message is copied once per retry (RocketMQ's default
# maxReconsumeTimes is 16), once to the dead-letter topic and once per resend: 64 covers that several times over.
MAX_COPIES = 64
# A query by key asks the index for more than it returns: index times are rounded to the second and different
# keys can share a hash, so some offsets found are dropped. It asks again for more, up to this many, when too
# many were dropped.
MAX_INDEX_LOOKUPS = 4096
# An offset message id: 16 bytes (IPv4 host, port, offset) or 28 bytes (IPv6 host), in hex (core.store.message_id).
_OFFSET_ID = re.compile(r"[0-9A-Fa-f]{32}|[0-9A-Fa-f]{56}")
# Where the broker parks a copy before it reaches a retry topic (a retry waits its delay level there).
_PARKING_TOPICS = (SCHEDULE_TOPIC, TIMER_TOPIC)


def parse_offset_msg_id(msg_id: str) -> tuple[tuple[str, int], int]:
    """((host, port), commit-log offset) from an offset message id; IllegalArgumentError naming the id when it is not
    32 (IPv4) or 56 (IPv6) hex characters, or names an impossible port or offset."""
    if not isinstance(msg_id, str) or _OFFSET_ID.fullmatch(msg_id) is None:
        shown = repr(msg_id) if isinstance(msg_id, str) else f"of type {type(msg_id).__name__}"
        raise IllegalArgumentError(
            f"message id {shown} is not an offset message id: one has 32 hex characters (IPv4 broker) or 56"
            " (IPv6); a unique id (UNIQ_KEY) is looked up by topic instead"
        )
    (host, port), offset = decode_offset_msg_id(msg_id)
    if port > 0xFFFF or offset < 0:
        raise IllegalArgumentError(
            f"message id {msg_id!r} names port {port} and commit-log offset {offset}; no record can be there"
        )
    return (host, port), offset


def read_at(store: MessageStore, commit_log_offset: int, what: str) -> StoredMessage:
    """The record, as stored, at a commit-log offset; MessageNotFoundError, beginning with `what`, when none is."""
    try:
        return store.read_message(commit_log_offset)
    except LookupError as exc:
        raise MessageNotFoundError(
            f"{what}: no record at commit-log offset {commit_log_offset} ({exc}); retention may have removed it"
        ) from exc
    except CorruptRecordError as exc:
        raise MessageNotFoundError(
            f"{what}: no record starts at commit-log offset {commit_log_offset} of this broker's log;"
            " check the id, or ask the broker that made it"
        ) from exc


def read_offset_msg_id(store: MessageStore, offset_msg_id: str) -> StoredMessage:
    """The record, as stored (body not decompressed), that an offset message id names: see
    MessageQueries.by_offset_id."""
    host, offset = parse_offset_msg_id(offset_msg_id)
    message = read_at(store, offset, f"message id {offset_msg_id!r}")
    if message.store_host != host:
        stored_by = f"{message.store_host[0]}:{message.store_host[1]}"
        raise MessageNotFoundError(
            f"message id {offset_msg_id!r} names a record stored by {host[0]}:{host[1]}; the record at that offset"
            f" here was stored by {stored_by}: ask the broker at {host[0]}:{host[1]}"
        )
    return message


def check_time_range(begin_ms: int, end_ms: int) -> None:
    if begin_ms > end_ms:
        raise IllegalArgumentError(
            f"time range begins at {begin_ms} ms, after its end at {end_ms} ms; give the begin first"
        )


def check_count(what: str, max_count: int) -> None:
    if not isinstance(max_count, int) or not 1 <= max_count <= MAX_QUERY_COUNT:
        raise IllegalArgumentError(f"{what}: max count {max_count!r} is out of range; give 1 to {MAX_QUERY_COUNT}")


def check_id(what: str, value: str) -> None:
    """A unique id or key to look up: the index holds a message's KEYS split at spaces, so a value with whitespace
    was never indexed whole."""
    if not isinstance(value, str) or not value or value != "".join(value.split()):
        raise IllegalArgumentError(
            f"{what} {value!r} is empty or holds whitespace; the index splits a message's keys at spaces: look up"
            " one key at a time"
        )


class QueriedBroker(GroupProgress, Protocol):
    """The broker as its message queries see it (core.broker.Broker is one): its store and topics, and what it knows
    of groups' progress."""

    @property
    def store(self) -> MessageStore: ...

    def topic_config(self, topic: str) -> TopicConfig: ...

    def has_topic(self, topic: str) -> bool: ...


class MessageQueries:
    """The queries of one broker's store, on the event loop (the index and log are read from memory maps)."""

    def __init__(self, broker: QueriedBroker) -> None:
        self._broker = broker

    def by_offset_id(self, offset_msg_id: str) -> StoredMessage:
        """The record an offset message id names (RocketMQ's viewMessage). IllegalArgumentError for a malformed id;
        MessageNotFoundError when no record starts at that offset or the record was stored by another host."""
        return decode_for_consumer(read_offset_msg_id(self._broker.store, offset_msg_id))

    def at_commit_log_offset(self, commit_log_offset: int) -> StoredMessage:
        """The record at a commit-log offset as stored (a compressed body stays so: a remoting client undoes it),
        whichever host stored it (RocketMQ's VIEW_MESSAGE_BY_ID, a send-back). MessageNotFoundError when none is."""
        return read_at(self._broker.store, commit_log_offset, f"commit-log offset {commit_log_offset}")

    def by_unique_id(self, topic: str, unique_id: str, group: str | None = None) -> list[StoredMessage]:
        """The records of `topic` whose unique id is `unique_id`, in store order; with `group`, also its copies in
        the group's retry and dead-letter topics. MessageNotFoundError when there is none."""
        self._check_topic(topic)
        check_id("unique id", unique_id)
        if group is not None:
            validate_group(group)
        records = self._records_of(topic, unique_id, group, parked=False)
        if not records:
            where = f"topic {topic!r}" + (f" or {retry_topic(group)!r}, {dlq_topic(group)!r}" if group else "")
            raise MessageNotFoundError(
                f"no message with unique id {unique_id!r} in {where}: it may be in another topic, removed by"
                " retention, or stored a moment ago and not indexed yet"
            )
        return [decode_for_consumer(record) for record in records]

    def by_key(
        self,
        topic: str,
        key: str,
        begin_ms: int = 0,
        end_ms: int = END_OF_TIME_MS,
        max_count: int = DEFAULT_QUERY_COUNT,
    ) -> list[StoredMessage]:
        """Messages of `topic` with `key` among their keys, stored in [begin_ms, end_ms] (ms since the epoch), newest
        first, at most `max_count` (1 to MAX_QUERY_COUNT). None found is an empty list."""
        self._check_topic(topic)
        check_id("key", key)
        check_time_range(begin_ms, end_ms)
        check_count(f"query of key {key!r} in topic {topic!r}", max_count)
        store = self._broker.store
        asked = 2 * max_count
        while True:
            candidates = _indexed(store, topic, key, asked, begin_ms, end_ms)
            found = [m for m in candidates if key in m.keys and begin_ms <= m.store_timestamp <= end_ms]
            if len(found) >= max_count or len(candidates) < asked or asked >= MAX_INDEX_LOOKUPS:
                break
            asked *= 4
        found.sort(key=lambda m: (m.store_timestamp, m.commit_log_offset), reverse=True)
        return [decode_for_consumer(message) for message in found[:max_count]]

    def by_time_range(
        self, topic: str, begin_ms: int, end_ms: int, max_count: int = DEFAULT_QUERY_COUNT
    ) -> list[StoredMessage]:
        """Messages of `topic` stored in [begin_ms, end_ms], oldest first over all its queues, at most `max_count`
        (1 to MAX_QUERY_COUNT): the first of the range, as the RocketMQ Dashboard's topic search by time. Each queue
        is entered at the first offset stored at or after begin_ms (the consume queue's time search) and read on
        until past end_ms."""
        self._check_topic(topic)
        check_time_range(begin_ms, end_ms)
        check_count(f"query of topic {topic!r} by time", max_count)
        store = self._broker.store
        found: list[StoredMessage] = []
        for queue_id in range(self._broker.topic_config(topic).read_queue_nums):
            offset = store.offset_by_time(topic, queue_id, begin_ms)
            taken = 0
            while taken < max_count:
                got = store.get_messages(topic, queue_id, offset, max_count - taken)
                if not got.messages:
                    break
                in_range = [m for m in got.messages if begin_ms <= m.store_timestamp <= end_ms]
                found += in_range
                taken += len(in_range)
                if got.messages[-1].store_timestamp > end_ms or got.next_begin_offset <= offset:
                    break
                offset = got.next_begin_offset
        found.sort(key=lambda m: (m.store_timestamp, m.commit_log_offset))
        return [decode_for_consumer(message) for message in found[:max_count]]

    def track(self, group: str, topic: str, unique_id: str) -> MessageTrack:
        """The consumption state for `group` of the message with `unique_id` first sent to `topic`
        (core.consume_state): consumed, not yet, in retry, in the dead-letter topic, or why it cannot be told."""
        self._check_topic(topic)
        check_id("unique id", unique_id)
        validate_group(group)
        records = self._records_of(topic, unique_id, group, parked=True)
        if not records:
            raise MessageNotFoundError(
                f"no message with unique id {unique_id!r} in topic {topic!r} nor in the copies of group {group!r}:"
                " check the topic, or the message was removed by retention"
            )
        return track_records(self._broker, group, topic, records)

    def _check_topic(self, topic: str) -> None:
        if not self._broker.has_topic(topic):
            raise TopicNotFoundError(f"topic {topic!r} does not exist on this broker; check its name", topic)

    def _records_of(self, topic: str, unique_id: str, group: str | None, parked: bool) -> list[StoredMessage]:
        """Raw records with `unique_id`: those of `topic`, and with `group` its copies in the group's retry and
        dead-letter topics (and, with `parked`, retries waiting in the broker's parking topics), in store order."""
        store = self._broker.store
        records = [m for m in _indexed(store, topic, unique_id, MAX_COPIES) if m.unique_id == unique_id]
        if group is not None:
            # Copies are stored after the original: the time bound keeps other topics' lookups short.
            since = min((m.store_timestamp for m in records), default=0) - CLOCK_SLACK_MS
            retry, dead = retry_topic(group), dlq_topic(group)
            for copies_topic in (retry, dead, *(_PARKING_TOPICS if parked else ())):
                for copy in _indexed(store, copies_topic, unique_id, MAX_COPIES, since):
                    if copy.unique_id != unique_id:
                        continue
                    # A group's retry topic holds the failures of every topic it consumes: keep this topic's.
                    if copy.properties.get(PROPERTY_RETRY_TOPIC, topic) != topic:
                        continue
                    if copies_topic in _PARKING_TOPICS and copy.properties.get(PROPERTY_REAL_TOPIC) != retry:
                        continue
                    records.append(copy)
        records.sort(key=lambda m: m.commit_log_offset)
        return records


__all__ = [
    "DEFAULT_QUERY_COUNT",
    "MAX_QUERY_COUNT",
    "MessageQueries",
    "check_id",
    "check_time_range",
    "parse_offset_msg_id",
    "read_offset_msg_id",
]


def _indexed(
    store: MessageStore, topic: str, key: str, max_num: int, begin_ms: int = 0, end_ms: int = END_OF_TIME_MS
) -> list[StoredMessage]:
    """MessageStore.query_messages, with the store's refusal (an index process that cannot answer yet) as the
    core's error."""
    try:
        return store.query_messages(topic, key, max_num, begin_ms, end_ms)
    except StoreError as exc:
        raise from_store_error(exc) from exc
