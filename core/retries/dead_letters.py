"""A consumer group's dead letters: listed, and resent to the group under the topic they were first consumed from
(what RocketMQ's dashboard offers for a %DLQ% topic). The admin CLI reaches these through `Broker.dead_letters`.

A dead letter is a record of %DLQ%G (one queue, which nobody consumes by itself): a copy of a message group G failed
to consume maxReconsumeTimes times, keeping the original's body, UNIQ_KEY, KEYS, TAGS and user properties, with
RETRY_TOPIC (the topic it was first consumed from), ORIGIN_MESSAGE_ID and DLQ_ORIGIN_REASON.

Listing reads the dead-letter queue in store order, the letters stored in [begin_ms, end_ms], a page at a time:
a page holds at most `limit` letters and about 4 MiB, and names the queue offset the next page starts from.

Resending stores, for each dead letter, a fresh message for its group alone: in the group's retry topic %RETRY%G,
without delay, which only G's members consume and which they see under the dead letter's RETRY_TOPIC (the topic
it was first consumed from). A dead letter is one group's failure: resending it to the topic itself would hand it
again to every other group subscribed there (RocketMQ's dashboard sends it to the group's consumer directly). The
copy keeps the body as stored (a compressed body keeps its flag), UNIQ_KEY (so the user can follow the message),
KEYS, TAGS and user properties; reconsume count 0; the other retry and dead-letter properties removed; the queue
chosen as a producer would (by sharding key, else round robin). The dead letter stays where it is, as in RocketMQ;
the copy names it in __MOVED_FROM (core.moves).

A resend is safe to repeat, after a crash in its middle too: before storing a copy, the index is asked whether the
topic holds one made from that dead letter already (core.moves.already_moved), and if so the letter is reported as
already resent. Resends of one group run one at a time, each after everything stored before it is indexed.
Whatever happens, the call answers with a summary: per dead letter RESENT, ALREADY_RESENT or FAILED with the reason.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from core.compression import decode_for_consumer
from core.errors import (
    GroupNotFoundError,
    IllegalArgumentError,
    MessageNotFoundError,
    ServiceNotAvailableError,
)
from core.message_queries import MAX_COPIES, check_id, check_time_range, read_offset_msg_id
from core.message_queue import MessageQueue
from core.moves import MovingBroker, already_moved, moved_copy, store_copies
from core.results import SendResult, SendStatus
from core.retries.send_back import RetryTopicBroker, ensure_retry_topic
from core.store.message import PROPERTY_MESSAGE_GROUP, Message, StoredMessage
from core.store.message_store import END_OF_TIME_MS, MessageStore
from core.system_topics import (
    PROPERTY_DELAY_LEVEL,
    PROPERTY_DLQ_REASON,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_RETRY_TOPIC,
    dlq_topic,
    retry_topic,
)
from core.tables.subscription_group import validate_group

log = logging.getLogger(__name__)

# A page of dead letters: 32 by default, as RocketMQ's pull batch; at most 1,000 (a page is held in memory, and its
# read stops at about 4 MiB anyway: MessageStore.get_messages).
DEFAULT_PAGE_SIZE = 32
MAX_PAGE_SIZE = 1000
# Dead letters resent per round: checked against the index, then stored in one batch per queue.
RESEND_BATCH = 32
# What a retry and a dead letter carry that a fresh message must not: the resent copy starts its life again.
RETRY_PROPERTIES = (
    PROPERTY_RETRY_TOPIC,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_DLQ_REASON,
    PROPERTY_MAX_RECONSUME_TIMES,
    PROPERTY_RECONSUME_TIME,
    PROPERTY_DELAY_LEVEL,
)


class ResendStatus(enum.Enum):
    RESENT = "RESENT"
    ALREADY_RESENT = "ALREADY_RESENT"
    FAILED = "FAILED"


@dataclass(slots=True, frozen=True)
class DeadLetter:
    """One dead letter: the record as consumers would see it (body decompressed), what it says about its past, and
    whether its topic holds a resent copy already."""

    message: StoredMessage
    original_topic: str | None
    origin_message_id: str | None
    reason: str | None
    resent: bool

    @property
    def offset_msg_id(self) -> str:
        return self.message.offset_msg_id

    @property
    def unique_id(self) -> str | None:
        return self.message.unique_id


@dataclass(slots=True, frozen=True)
class DeadLetterPage:
    letters: list[DeadLetter]
    # Pass as `start_offset` for the next page; None when the range holds no more dead letters (for now).
    next_offset: int | None


@dataclass(slots=True, frozen=True)
class ResendOutcome:
    dead_letter_id: str  # the dead letter's offset message id
    unique_id: str | None
    status: ResendStatus
    topic: str | None  # where it was resent, or would have been
    new_message_id: str | None = None  # RESENT: the offset message id of the fresh message
    reason: str | None = None  # FAILED: why; RESENT: a remark (not confirmed on disk in time)


@dataclass(slots=True, frozen=True)
class ResendSummary:
    outcomes: list[ResendOutcome] = field(default_factory=list)
    # Set when the resend stopped before the end (the store refuses writes): the letters after the last outcome
    # were not looked at. Repeat the call once the store takes writes again.
    stopped: str | None = None

    def _with(self, status: ResendStatus) -> list[ResendOutcome]:
        return [outcome for outcome in self.outcomes if outcome.status is status]

    @property
    def resent(self) -> list[ResendOutcome]:
        return self._with(ResendStatus.RESENT)

    @property
    def already_resent(self) -> list[ResendOutcome]:
        return self._with(ResendStatus.ALREADY_RESENT)

    @property
    def failed(self) -> list[ResendOutcome]:
        return self._with(ResendStatus.FAILED)


class DeadLetterBroker(MovingBroker, RetryTopicBroker, Protocol):
    """The broker as the dead-letter tools see it (core.broker.Broker is one): its store, the dead-letter and retry
    topics and their queues, and storing the copies they resend."""

    @property
    def store(self) -> MessageStore: ...

    def max_offset(self, topic: str, queue_id: int) -> int: ...

    def write_queues(self, topic: str) -> list[MessageQueue]: ...

    async def wait_visible(self, timeout_s: float = 10.0) -> bool: ...


class DeadLetters:
    def __init__(self, broker: DeadLetterBroker) -> None:
        self._broker = broker
        self._locks: dict[str, asyncio.Lock] = {}
        self._round_robin: dict[str, itertools.count[int]] = {}

    # --- listing -----------------------------------------------------------------------------------------

    async def list_page(
        self,
        group: str,
        begin_ms: int = 0,
        end_ms: int = END_OF_TIME_MS,
        start_offset: int | None = None,
        limit: int = DEFAULT_PAGE_SIZE,
    ) -> DeadLetterPage:
        """Up to `limit` dead letters of `group` stored in [begin_ms, end_ms], in store order, from queue offset
        `start_offset` (a page's next_offset; by default the first letter of the range)."""
        self._check_group(group)
        check_time_range(begin_ms, end_ms)
        if not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_SIZE:
            raise IllegalArgumentError(
                f"dead letters of group {group!r}: page size {limit!r} is out of range; give 1 to {MAX_PAGE_SIZE}"
            )
        if start_offset is not None and (not isinstance(start_offset, int) or start_offset < 0):
            raise IllegalArgumentError(
                f"dead letters of group {group!r}: start offset {start_offset!r} is not valid; give a page's"
                " next_offset, or none to start at begin_ms"
            )
        await self._broker.wait_visible()  # `resent` asks the index, which must hold what was stored so far
        records, next_offset = self._read(group, begin_ms, end_ms, start_offset, limit)
        letters = []
        for record in records:
            original = record.properties.get(PROPERTY_RETRY_TOPIC)
            resent = bool(original and record.unique_id) and self._resent(record, group, original or "")
            letters.append(
                DeadLetter(
                    decode_for_consumer(record),
                    original,
                    record.properties.get(PROPERTY_ORIGIN_MESSAGE_ID),
                    record.properties.get(PROPERTY_DLQ_REASON),
                    resent,
                )
            )
        return DeadLetterPage(letters, next_offset)

    def _check_group(self, group: str) -> None:
        validate_group(group)
        broker = self._broker
        dead = dlq_topic(group)
        if broker.groups.get(group) is None and not broker.has_topic(dead) and broker.max_offset(dead, 0) == 0:
            raise GroupNotFoundError(f"consumer group {group!r} does not exist and has no dead letters; check its name")

    def _read(
        self, group: str, begin_ms: int, end_ms: int, start_offset: int | None, limit: int
    ) -> tuple[list[StoredMessage], int | None]:
        """Raw dead letters (as stored) of the range from `start_offset`, and the offset to read on from."""
        store = self._broker.store
        dead = dlq_topic(group)
        low, high = store.min_offset(dead, 0), store.max_offset(dead, 0)
        offset = store.offset_by_time(dead, 0, begin_ms) if start_offset is None else start_offset
        offset = max(offset, low)
        records: list[StoredMessage] = []
        while offset < high and not records:
            got = store.get_messages(dead, 0, offset, limit)
            if got.next_begin_offset <= offset:
                return records, None  # the queue is gone (its topic deleted): nothing more to read
            for record in got.messages:
                if record.store_timestamp > end_ms:
                    return records, None
                if record.store_timestamp >= begin_ms:
                    records.append(record)
            offset = got.next_begin_offset
        return records, (offset if offset < high else None)

    # --- resending ---------------------------------------------------------------------------------------

    async def resend_by_unique_id(self, group: str, unique_id: str) -> ResendSummary:
        """Resend every dead letter of `group` with this unique id (a message can die more than once, when resent).
        MessageNotFoundError when the group has none."""
        self._check_group(group)
        check_id("unique id", unique_id)
        async with self._lock(group):
            await self._broker.wait_visible()
            dead = dlq_topic(group)
            records = [
                record
                for record in self._broker.store.query_messages(dead, unique_id, MAX_COPIES)
                if record.unique_id == unique_id
            ]
            if not records:
                raise MessageNotFoundError(
                    f"no dead letter with unique id {unique_id!r} in {dead!r}; list the group's dead letters to find"
                    " it, or it was removed by retention"
                )
            records.sort(key=lambda record: record.commit_log_offset)
            return await self._resend_records(group, records)

    async def resend_by_offset_id(self, group: str, offset_msg_id: str) -> ResendSummary:
        """Resend the dead letter an offset message id names; it must be in `group`'s dead-letter topic."""
        self._check_group(group)
        record = read_offset_msg_id(self._broker.store, offset_msg_id)
        dead = dlq_topic(group)
        if record.topic != dead:
            raise MessageNotFoundError(
                f"message id {offset_msg_id!r} names a message of topic {record.topic!r}, not a dead letter of"
                f" group {group!r} ({dead!r}); give the id of a dead letter"
            )
        async with self._lock(group):
            await self._broker.wait_visible()
            return await self._resend_records(group, [record])

    async def resend_range(self, group: str, begin_ms: int, end_ms: int) -> ResendSummary:
        """Resend the dead letters of `group` stored in [begin_ms, end_ms], in store order."""
        self._check_group(group)
        check_time_range(begin_ms, end_ms)
        outcomes: list[ResendOutcome] = []
        async with self._lock(group):
            await self._broker.wait_visible()
            offset: int | None = None
            while True:
                records, offset = self._read(group, begin_ms, end_ms, offset, RESEND_BATCH)
                summary = await self._resend_records(group, records)
                outcomes += summary.outcomes
                if summary.stopped is not None or offset is None:
                    return ResendSummary(outcomes, summary.stopped)

    async def resend_all(self, group: str) -> ResendSummary:
        """Resend every dead letter of `group`."""
        return await self.resend_range(group, 0, END_OF_TIME_MS)

    def _lock(self, group: str) -> asyncio.Lock:
        lock = self._locks.get(group)
        if lock is None:
            lock = self._locks[group] = asyncio.Lock()
        return lock

    async def _resend_records(self, group: str, records: Sequence[StoredMessage]) -> ResendSummary:
        """Resend raw dead letters whose copies the index is up to date about (held under the group's lock)."""
        outcomes: dict[int, ResendOutcome] = {}
        # Copies to store, by (topic, queue): one batch each, in the order of their dead letters.
        batches: dict[tuple[str, int], list[tuple[int, StoredMessage, Message]]] = {}
        for number, record in enumerate(records):
            original = record.properties.get(PROPERTY_RETRY_TOPIC)
            if not original:
                outcomes[number] = _failed(
                    record, None, f"it has no {PROPERTY_RETRY_TOPIC} property, so its topic is unknown; send it by hand"
                )
            elif not record.unique_id:
                outcomes[number] = _failed(
                    record, original, "it has no unique id (UNIQ_KEY): a resend could not be told from a repeat"
                )
            elif (resent_to := self._resent_to(record, group, original)) is not None:
                # The topic the earlier resend stored its copy in, as the RESENT outcome named it then.
                outcomes[number] = ResendOutcome(
                    record.offset_msg_id, record.unique_id, ResendStatus.ALREADY_RESENT, resent_to
                )
            elif not self._broker.has_topic(original):
                outcomes[number] = _failed(
                    record, original, f"its topic {original!r} no longer exists; create it again to resend"
                )
            else:
                copy = self._fresh_copy(record, group, original)
                batches.setdefault((copy.topic, copy.queue_id), []).append((number, record, copy))
        stopped = None
        for batch in batches.values():
            if stopped is not None:
                for number, record, copy in batch:
                    outcomes[number] = _failed(record, copy.topic, stopped)
                continue
            stored = await store_copies(self._broker, [copy for _, _, copy in batch])
            for (number, record, copy), result in zip(batch, stored, strict=True):
                if isinstance(result, SendResult):
                    remark = None if result.status is SendStatus.SEND_OK else f"stored, {result.status.value}"
                    outcomes[number] = ResendOutcome(
                        record.offset_msg_id,
                        record.unique_id,
                        ResendStatus.RESENT,
                        copy.topic,
                        result.offset_msg_id,
                        remark,
                    )
                else:
                    outcomes[number] = _failed(record, copy.topic, str(result))
                    if isinstance(result, ServiceNotAvailableError):
                        stopped = str(result)
        resent = sum(outcome.status is ResendStatus.RESENT for outcome in outcomes.values())
        if resent:
            log.info("dead letters of group %r: %d resent", group, resent)
        return ResendSummary([outcomes[number] for number in range(len(records))], stopped)

    def _resent(self, record: StoredMessage, group: str, original: str) -> bool:
        """Whether a copy of the dead letter was resent."""
        return self._resent_to(record, group, original) is not None

    def _resent_to(self, record: StoredMessage, group: str, original: str) -> str | None:
        """The topic a copy of the dead letter was resent to: the group's retry topic (or, by an earlier mqgate,
        its original topic); None when it was not resent."""
        store = self._broker.store
        for topic in (retry_topic(group), original):
            if already_moved(store, record, topic):
                return topic
        return None

    def _fresh_copy(self, record: StoredMessage, group: str, original: str) -> Message:
        """The copy resent for `group` alone: in its retry topic (which only its members consume, at once: no delay
        level), seen by them under the `original` topic, as a dead letter is the group's and no other's."""
        copy = moved_copy(record, drop=RETRY_PROPERTIES)
        topic = copy.topic = ensure_retry_topic(self._broker, group)
        copy.properties[PROPERTY_RETRY_TOPIC] = original
        copy.reconsume_times = 0
        queues = len(self._broker.write_queues(topic)) or 1
        # As core.client.producer chooses: a sharding key keeps one key's messages in one queue, in order.
        sharding_key = record.properties.get(PROPERTY_MESSAGE_GROUP)
        if sharding_key is not None:
            copy.queue_id = zlib.crc32(sharding_key.encode()) % queues
        else:
            counter = self._round_robin.setdefault(topic, itertools.count())
            copy.queue_id = next(counter) % queues
        return copy


def _failed(record: StoredMessage, topic: str | None, reason: str) -> ResendOutcome:
    return ResendOutcome(record.offset_msg_id, record.unique_id, ResendStatus.FAILED, topic, reason=reason)


__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_PAGE_SIZE",
    "DeadLetter",
    "DeadLetterPage",
    "DeadLetters",
    "ResendOutcome",
    "ResendStatus",
    "ResendSummary",
]
