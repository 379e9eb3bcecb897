"""Pop consumption, as RocketMQ 5's broker does it for SimpleConsumer (PopMessageProcessor, AckMessageProcessor,
ChangeInvisibleTimeProcessor, ConsumerOrderInfoManager), in process.

A pop hands out up to `max_nums` messages of a topic to a consumer group and makes each invisible to the group's
other pops for `invisible_ms` (the limits of both, PopInitMode and PoppedMessage are in core.pop.request). The
consumer acks each message with its receipt handle (core.pop.receipt_handle), or changes its invisible time.
Consumers of one group share one PopService per broker (`PopService.of(broker)`), so a message goes to one of
them at a time, whichever queue it is in: pop consumers do not divide queues among themselves as pull and push
consumers do.

A message not acked in time goes back (core.retries.send_back), as RocketMQ's revive does: to the group's retry topic
`%RETRY%<group>`, at once (its invisible time was the wait), where every pop of the group looks too (one pop in
five looks there first); after max_reconsume_times + 1 deliveries (the group's retry_max_times, 16) to the
group's dead-letter topic `%DLQ%<group>`. Either way it is done in its queue, so it no longer holds the committed
offset back. The delivery attempt counts across retries (attempt 1 first, `reconsume_times = attempt - 1`). FIFO
messages are not sent to the retry topic, which would lose their order: they are delivered again in place until
the limit, then dead-lettered. A message goes back when a pop of its group next looks at its queue.

State, per (group, topic, queue), in memory:
- `cursor`: the next consume-queue offset to read;
- the messages read and not acked, in offset order: in flight (delivered, invisible until a deadline, or visible
  again and waiting to be delivered again), or held back (FIFO, below);
- the group's committed offset in the broker's offset manager: always the lowest offset not acked (the first
  unacked message, else the cursor). Messages skipped by the pop's filter count as done.

Where RocketMQ differs: it advances the consume offset at pop time and persists each pop as a checkpoint in a
revive topic, from which unacked messages go to a retry topic. We keep invisibility in memory and
persist only the committed offset, which never passes an unacked message. After a restart (or a new PopService)
everything from the committed offset is delivered again: at least once, never lost; messages acked above the
lowest unacked one of their queue are delivered again too, and receipt handles of the previous run are refused.

Where a group starts on a queue it has no offset for: RocketMQ 5's proxy pops with ConsumeInitMode.MAX for every
SimpleConsumer (ReceiveMessageActivity), and the broker's getInitOffset then starts at 0 when the queue has never
been trimmed and its head is in memory (initPopOffsetByCheckMsgInMem, on by default), else at the queue's last
message (max offset - 1: "pop last one"), and commits that offset at once. We cannot see the page cache, so we
take "never trimmed" (min offset 0) for "in memory": a young queue is read from its first message, a queue whose
head retention removed starts at its last message. `PopInitMode.MIN` starts at the first message kept.

FIFO: when the topic's message type is FIFO, or the group consumes orderly (RocketMQ 5 decides by the group's
consumeMessageOrderly alone), messages that carry a message group (the `__SHARDINGKEY` property, where RocketMQ
5 clients put it) are handed out one at a time per (queue, message group): the next one waits until the one
before is acked, and one that becomes visible again is delivered again first. RocketMQ's ConsumerOrderInfoManager
blocks the whole queue instead; blocking per message group keeps the per-group order and lets other groups in
the queue go on. Messages without a group are not ordered. Messages read while their group is busy are held,
up to MAX_UNACKED_PER_QUEUE unacked messages per queue; at that bound the queue is blocked, as in RocketMQ.

Acks are idempotent: acking a message that is already done does nothing, whichever of its handles is used. A
handle of an earlier delivery of a message still in flight is refused (ReceiptHandleError, SUPERSEDED); a
handle whose invisible time has passed, while the message was not yet sent back or delivered again, is still
honoured, as in RocketMQ where an ack can beat the revive; once the message was sent back, an ack of the old
handle does nothing (the retried copy is delivered, at least once).

Everything here runs on the broker's event loop and is not thread-safe. The clock is injectable (seconds, as
time.monotonic) so that tests move time instead of sleeping; long polling itself waits in real time.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import logging
import secrets
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from core.broker import Broker
from core.compression import decode_for_consumer
from core.errors import CoreError, NoPermissionError
from core.filter import MessageFilter
from core.pop.errors import PopError, ReceiptHandleError, ReceiptHandleProblem
from core.pop.group_state import PopGroupState, TopicState, notify
from core.pop.queue_state import MAX_UNACKED_PER_QUEUE, PopEntry, PopQueueState
from core.pop.receipt_handle import ReceiptHandle
from core.pop.request import MAX_POP_LONG_POLL_MS, PopInitMode, PoppedMessage, check_batch, check_invisible
from core.retries.send_back import as_consumed, send_back
from core.store.errors import CorruptRecordError
from core.store.message import PROPERTY_MESSAGE_GROUP, StoredMessage
from core.store.message_store import GetStatus
from core.system_topics import retry_topic
from core.tables.topic_config import MessageType, Perm

log = logging.getLogger(__name__)

# Messages sent back remembered, to refuse acks of their old handles (about 150 bytes each).
MAX_SENT_BACK_REMEMBERED = 100_000
# One pop in this many looks at the group's retry topic first (RocketMQ's PopMessageProcessor: one in five).
RETRY_FIRST_EVERY = 5


class PopService(PopGroupState):
    """Pop, ack and change of invisible time for every consumer group of one broker.

    Use `PopService.of(broker)` so that all consumers of a broker share one; build one yourself to give it a
    clock. Two services on one broker must not serve the same group: each believes it owns the group's offsets.
    """

    def __init__(
        self,
        broker: Broker,
        clock: Callable[[], float] = time.monotonic,
        *,
        init_mode: PopInitMode = PopInitMode.MAX,
    ) -> None:
        super().__init__(broker, init_mode)
        self.clock = clock
        self.run_id = secrets.token_hex(4)
        self._delivery_ids = itertools.count(1)
        self._pops = itertools.count()
        # (group, topic, queue id, offset) -> attempts, of messages sent back: an ack with a handle of theirs is
        # refused as out of date, not taken as done (their copy will be delivered). The oldest are forgotten.
        self._sent_back: collections.OrderedDict[tuple[str, str, int, int], int] = collections.OrderedDict()

    @classmethod
    def of(cls, broker: Broker) -> PopService:
        """The broker's shared PopService (created on first use, with the real clock)."""
        return broker.shared(cls, lambda: cls(broker))

    # --- pop ---------------------------------------------------------------------------------------------

    async def pop(
        self,
        group: str,
        topic: str,
        max_nums: int,
        invisible_ms: int,
        message_filter: MessageFilter | None = None,
        long_poll_ms: int = 0,
    ) -> list[PoppedMessage]:
        """Take up to `max_nums` messages of `topic` for `group`, invisible to the group for `invisible_ms`.

        Messages visible again go first, then new ones, starting at a different queue each call. With nothing
        to hand out, wait up to `long_poll_ms` (at most MAX_POP_LONG_POLL_MS) for a message to arrive, an
        unacked one to become visible again, or an ack to free a held FIFO message. `message_filter` applies to
        messages read for the first time; the group should use one subscription per topic, as in RocketMQ.
        """
        check_batch(max_nums)
        check_invisible(invisible_ms)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(max(long_poll_ms, 0), MAX_POP_LONG_POLL_MS) / 1000
        retry = retry_topic(group)
        while True:
            # The retry topic is made by the first message sent back, maybe just now.
            await self._send_back_expired(group, topic)
            topics = [topic, retry] if topic != retry and self.broker.has_topic(retry) else [topic]
            # Now and then the retry topic first, so that retried messages are not starved by a busy topic.
            order = topics[::-1] if next(self._pops) % RETRY_FIRST_EVERY == 0 else topics
            popped: list[PoppedMessage] = []
            progressed = False
            for name in order:
                if name != topic:
                    await self._send_back_expired(group, name)
                got, moved = self._take(
                    group, name, max_nums - len(popped), invisible_ms, message_filter if name == topic else None
                )
                if got:  # counted under the topic read (a retry topic's own name), as Broker.pull counts
                    self.broker.traffic.delivered(name, len(got), sum([len(p.message.body) for p in got]))
                popped += got
                progressed |= moved
                if len(popped) >= max_nums:
                    break
            if popped:
                return popped
            if progressed:
                # Only held FIFO messages or filtered ones were read; read on, letting others run in between.
                await asyncio.sleep(0)
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            await self.wait(group, topics, remaining)

    async def wait(self, group: str, topics: Sequence[str], timeout_s: float) -> bool:
        """Wait until a pop of `group` in one of `topics` may find something: a message arrives past a queue's
        cursor, a message in flight becomes visible again, or an ack or change of invisible time frees one.

        True when one of these happened, False when `timeout_s` passed first. Nothing is taken, so the wait may
        be cancelled at any point; a SimpleConsumer uses it to long-poll several topics at once.
        """
        if timeout_s <= 0:
            return False
        broker = self.broker
        now = self.clock()
        bound = timeout_s
        events: list[asyncio.Event] = []
        cursors: list[tuple[str, int, int]] = []
        for topic in topics:
            topic_state = self._topic(group, topic)
            if topic_state.changed is None:
                topic_state.changed = asyncio.Event()
            events.append(topic_state.changed)
            for queue_id, state in list(topic_state.queues.items()):
                state = self._current(group, topic, queue_id, state)
                deadline = state.next_deadline()
                if deadline is not None:
                    bound = min(bound, max(deadline - now, 0.0))
                if not state.full:  # a full queue gives nothing however many messages arrive
                    cursors.append((topic, queue_id, state.cursor))
        tasks: list[asyncio.Future[bool]] = [asyncio.ensure_future(event.wait()) for event in events]
        tasks += [asyncio.ensure_future(broker.wait_for_message(t, q, offset, timeout_s)) for t, q, offset in cursors]
        try:
            done, _ = await asyncio.wait(tasks, timeout=bound, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        if any(not task.cancelled() and task.exception() is None and task.result() for task in done):
            return True
        return bound < timeout_s  # woken by a deadline: a message is visible again

    async def _send_back_expired(self, group: str, topic: str) -> None:
        """Messages whose invisible time passed without an ack go back (core.retries.send_back): to the group's retry
        topic,
        where the group pops them at once (the invisible time was their wait), or to its dead-letter topic once
        delivered max_reconsume_times + 1 times. FIFO messages are delivered again in place, keeping their
        order, until they reach that limit. A message sent back is done in its queue: the offset moves on."""
        topic_state = self._topics.get((group, topic))
        if topic_state is None or not topic_state.queues:
            return
        broker = self.broker
        fifo = self._fifo(group, topic)
        limit = broker.groups.get_or_auto_create(group).retry_max_times
        now = self.clock()
        sent = False
        for queue_id, state in list(topic_state.queues.items()):
            state = self._current(group, topic, queue_id, state)
            expired = state.take_expired(now, MAX_UNACKED_PER_QUEUE)
            if not expired:
                continue
            going: list[tuple[PopEntry, StoredMessage]] = []
            for entry in expired:
                stored = self._reread(topic, group, state, entry)
                if stored is None:
                    continue
                times = stored.reconsume_times + entry.attempts - 1  # consumed again before this failure
                if fifo and times < limit:
                    state.deliver(entry, entry.invisible_until, entry.delivery_id, again=False)  # in place
                    continue
                going.append((entry, replace(stored, reconsume_times=times)))
            for entry, message in going:
                delivery_id = entry.delivery_id
                try:
                    await send_back(
                        broker,
                        message,
                        group,
                        immediately=True,
                        delay_level=-1 if fifo else 0,
                        reason=f"not acked within its invisible time after {message.reconsume_times + 1} deliveries",
                    )
                except CoreError as exc:
                    log.warning("group %r: message %s not sent back (%s); delivered again here", group, topic, exc)
                    state.deliver(entry, now, delivery_id, again=False)
                    continue
                sent = True
                still_ours = state.entries.get(entry.offset) is entry and entry.delivery_id == delivery_id
                if still_ours:
                    self._remember_sent_back((group, topic, state.queue_id, entry.offset), entry.attempts)
                    if state.remove(entry.offset):
                        notify(topic_state)
            self._commit(group, topic, state)
        if sent:
            await broker.wait_visible()  # this pop may hand the copies out already

    def _remember_sent_back(self, key: tuple[str, str, int, int], attempts: int) -> None:
        self._sent_back[key] = attempts
        if len(self._sent_back) > MAX_SENT_BACK_REMEMBERED:
            self._sent_back.popitem(last=False)

    def _fifo(self, group: str, topic: str) -> bool:
        broker = self.broker
        return (
            broker.topic_config(topic).message_type is MessageType.FIFO
            or broker.groups.get_or_auto_create(group).consume_message_orderly
        )

    def _take(
        self,
        group: str,
        topic: str,
        max_nums: int,
        invisible_ms: int,
        message_filter: MessageFilter | None,
    ) -> tuple[list[PoppedMessage], bool]:
        """One pass over the topic's queues. Returns the messages handed out, and whether any queue's state
        moved without handing anything out (held or filtered messages read, vanished messages dropped)."""
        broker = self.broker
        config = broker.topic_config(topic)
        if not config.perm & Perm.READ:
            raise NoPermissionError(
                f"topic {topic!r} is not readable (perm {config.perm!r}); give it READ (4) to pop it"
            )
        group_config = broker.groups.get_or_auto_create(group)
        if not group_config.consume_enable:
            raise PopError(
                f"consumer group {group!r} may not consume (consumeEnable is false); enable it in its subscription "
                "group configuration"
            )
        fifo = config.message_type is MessageType.FIFO or group_config.consume_message_orderly
        topic_state = self._topic(group, topic)
        count = config.read_queue_nums
        start = topic_state.rotation % count
        topic_state.rotation = start + 1
        states = [self._queue_state(group, topic, (start + i) % count, topic_state) for i in range(count)]
        now = self.clock()
        until = now + invisible_ms / 1000
        popped: list[PoppedMessage] = []
        progressed = False
        # Messages visible again first (in FIFO order these are the first of their message group), then held
        # FIFO messages whose group was freed, then new ones.
        for state in states:
            if len(popped) >= max_nums:
                break
            expired = state.take_expired(now, max_nums - len(popped))
            progressed |= self._redeliver(group, topic, state, expired, until, popped)
        for state in states:
            if len(popped) >= max_nums:
                break
            progressed |= self._redeliver(group, topic, state, state.take_ready(max_nums - len(popped)), until, popped)
        for state in states:
            if len(popped) >= max_nums:
                break
            progressed |= self._read_new(group, topic, state, fifo, message_filter, max_nums, until, popped)
        for state in states:
            self._commit(group, topic, state)
        return popped, progressed

    def _read_new(
        self,
        group: str,
        topic: str,
        state: PopQueueState,
        fifo: bool,
        message_filter: MessageFilter | None,
        max_nums: int,
        until: float,
        popped: list[PoppedMessage],
    ) -> bool:
        """Read messages past the queue's cursor, handing out what may go; True if the cursor moved."""
        store = self.broker.store
        tag_filter = message_filter.matches_code if message_filter is not None else None
        body_filter = message_filter.matches_message if message_filter is not None else None
        moved = False
        while len(popped) < max_nums and not state.full:
            count = min(max_nums - len(popped), MAX_UNACKED_PER_QUEUE - len(state.entries))
            got = store.get_messages(topic, state.queue_id, state.cursor, count, tag_filter, body_filter)
            if got.status in (GetStatus.OFFSET_TOO_SMALL, GetStatus.OFFSET_OVERFLOW_BADLY):
                log.warning(
                    "group %r, topic %r, queue %d: pop offset %d is outside the queue [%d, %d); going on from %d",
                    group,
                    topic,
                    state.queue_id,
                    state.cursor,
                    got.min_offset,
                    got.max_offset,
                    got.next_begin_offset,
                )
                state.cursor = got.next_begin_offset
                moved = True
                continue
            if got.status not in (GetStatus.FOUND, GetStatus.NO_MATCHED_MESSAGE):
                break  # empty queue, or nothing past the cursor yet
            for stored in got.messages:
                message_group = (stored.properties.get(PROPERTY_MESSAGE_GROUP) or None) if fifo else None
                entry = state.add(stored.queue_offset, stored.commit_log_offset, message_group)
                if entry is not None:
                    popped.append(self._hand_out(group, topic, state, entry, stored, until))
            if got.next_begin_offset <= state.cursor:
                break
            state.cursor = got.next_begin_offset
            moved = True
        return moved

    def _redeliver(
        self,
        group: str,
        topic: str,
        state: PopQueueState,
        entries: list[PopEntry],
        until: float,
        popped: list[PoppedMessage],
    ) -> bool:
        """Hand out messages read before; True if some could not be read back and were dropped."""
        dropped = False
        for entry in entries:
            stored = self._reread(topic, group, state, entry)
            if stored is None:
                dropped = True
            else:
                popped.append(self._hand_out(group, topic, state, entry, stored, until))
        return dropped

    def _reread(self, topic: str, group: str, state: PopQueueState, entry: PopEntry) -> StoredMessage | None:
        """A message to hand out again, read back from the store; None (and the message counted as done) when
        retention removed it or it no longer reads back intact."""
        try:
            return self.broker.store.read_message(entry.commit_log_offset)
        except (LookupError, CorruptRecordError) as exc:
            log.warning(
                "group %r: message %s/%d@%d cannot be delivered again and is dropped: %s",
                group,
                topic,
                state.queue_id,
                entry.offset,
                exc,
            )
            state.remove(entry.offset)
            return None

    def _hand_out(
        self, group: str, topic: str, state: PopQueueState, entry: PopEntry, stored: StoredMessage, until: float
    ) -> PoppedMessage:
        delivery_id = next(self._delivery_ids)
        state.deliver(entry, until, delivery_id)
        handle = ReceiptHandle(
            self.run_id, delivery_id, entry.attempts, state.queue_id, entry.offset, topic, group
        ).encode()
        attempt = stored.reconsume_times + entry.attempts
        message = as_consumed(decode_for_consumer(replace(stored, reconsume_times=attempt - 1)))
        return PoppedMessage(message, handle, attempt, until)

    # --- ack and change of invisible time -----------------------------------------------------------------

    def ack(self, group: str, receipt_handle: str) -> None:
        """The message is done: it is not delivered again, and the group's committed offset in its queue moves
        up to the lowest message not acked. Acking a message already done does nothing."""
        handle, topic_state, state, entry = self._in_flight(group, receipt_handle)
        if entry is None:
            log.debug("group %r: %s was already acked", group, handle.describe())
            return
        released = state.remove(entry.offset)
        self._commit(group, handle.topic, state)
        if released:
            notify(topic_state)

    def change_invisible_duration(self, group: str, receipt_handle: str, invisible_ms: int) -> str:
        """Make the message invisible for `invisible_ms` from now (longer or shorter than before; 0 makes it
        visible at once). Returns the new receipt handle; the one given is no longer valid."""
        check_invisible(invisible_ms)
        handle, topic_state, state, entry = self._in_flight(group, receipt_handle)
        if entry is None:
            raise ReceiptHandleError(
                ReceiptHandleProblem.ALREADY_ACKED,
                f"{handle.describe()} was already acked, so its invisible time cannot change; "
                "drop the message, it will not be delivered again",
            )
        delivery_id = next(self._delivery_ids)
        state.deliver(entry, self.clock() + invisible_ms / 1000, delivery_id, again=False)
        notify(topic_state)  # a waiting pop recomputes its deadline; the message may be visible already
        return ReceiptHandle(
            self.run_id, delivery_id, entry.attempts, state.queue_id, entry.offset, handle.topic, group
        ).encode()

    async def dead_letter(self, group: str, receipt_handle: str, reason: str = "") -> bool:
        """Send the message of a handle in flight to the group's dead-letter topic at once, then count it done, as
        an ack would (RocketMQ's ForwardMessageToDeadLetterQueue: a FIFO push consumer whose own retries are spent).
        False, doing nothing, when the message is done already. Raises ReceiptHandleError as `ack` does, and the
        core's errors when the copy cannot be stored (the message then stays in flight)."""
        handle, topic_state, state, entry = self._in_flight(group, receipt_handle)
        if entry is None:
            return False
        stored = self._reread(handle.topic, group, state, entry)
        if stored is None:
            return False
        times = stored.reconsume_times + entry.attempts - 1
        delivery_id = entry.delivery_id
        why = reason or f"forwarded by its consumer after {times + 1} deliveries"
        await send_back(self.broker, replace(stored, reconsume_times=times), group, delay_level=-1, reason=why)
        if state.entries.get(entry.offset) is entry and entry.delivery_id == delivery_id and state.remove(entry.offset):
            notify(topic_state)
        self._commit(group, handle.topic, state)
        return True

    def _in_flight(
        self, group: str, receipt_handle: str
    ) -> tuple[ReceiptHandle, TopicState, PopQueueState, PopEntry | None]:
        """Check a handle against the state: the entry of its delivery, or None when the message is done."""
        handle = ReceiptHandle.decode(receipt_handle)
        if handle.run != self.run_id:
            raise ReceiptHandleError(
                ReceiptHandleProblem.OTHER_RUN,
                f"receipt handle of {handle.describe()} was issued by pop service run {handle.run!r}, this is run "
                f"{self.run_id!r}: the broker restarted since (or the handle is another broker's); the message "
                "will be delivered again from the group's committed offset, so drop this handle",
            )
        if handle.group != group:
            raise ReceiptHandleError(
                ReceiptHandleProblem.OTHER_GROUP,
                f"receipt handle of {handle.describe()} belongs to group {handle.group!r}, not {group!r}; "
                "ack with the consumer that received the message",
            )
        topic_state = self._topics.get((group, handle.topic))
        state = topic_state.queues.get(handle.queue_id) if topic_state is not None else None
        if topic_state is None or state is None:
            raise ReceiptHandleError(
                ReceiptHandleProblem.NOT_IN_FLIGHT,
                f"{handle.describe()}: group {group!r} has popped nothing from that queue in this run; "
                "pass the receipt_handle of a received message unchanged",
            )
        state = self._current(group, handle.topic, handle.queue_id, state)
        entry = state.entries.get(handle.queue_offset)
        if entry is None and handle.queue_offset < state.cursor:
            attempts = self._sent_back.get((group, handle.topic, handle.queue_id, handle.queue_offset))
            if attempts is not None:
                raise ReceiptHandleError(
                    ReceiptHandleProblem.SUPERSEDED,
                    f"receipt handle of {handle.describe()} is out of date: its invisible time passed after"
                    f" {attempts} deliveries and it was sent back (to the group's retry or dead-letter topic), from"
                    " where it is delivered again; ack that delivery",
                )
            return handle, topic_state, state, None
        if entry is None or entry.attempts == 0:
            raise ReceiptHandleError(
                ReceiptHandleProblem.NOT_IN_FLIGHT,
                f"{handle.describe()} is not in flight: the group's offsets were reset since it was delivered, "
                "or the handle was not issued for it; the message will be delivered again if it is due",
            )
        if entry.delivery_id != handle.delivery_id:
            if entry.attempts > handle.attempt:
                why = (
                    f"its invisible time passed and it was delivered again (attempt {entry.attempts}); only the "
                    "newest delivery's handle is accepted, use that one"
                )
            else:
                why = "its invisible time was changed since; use the handle change_invisible_duration returned"
            raise ReceiptHandleError(
                ReceiptHandleProblem.SUPERSEDED, f"receipt handle of {handle.describe()} is out of date: {why}"
            )
        return handle, topic_state, state, entry
