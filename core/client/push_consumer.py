"""The push consumer (RocketMQ's DefaultMQPushConsumer), in process.

For each queue the consumer owns it runs a pull loop (long polling, flow control: it pauses while the queue holds
`pull_threshold_for_queue` messages or `pull_threshold_size_for_queue_mib` MiB, until consumption makes room) that
fills a ProcessQueue.
Concurrent listeners are called by a fixed pool of `consume_thread_max` worker tasks fed by one queue (RocketMQ's
consume thread pool; no task per message). An orderly listener gets one queue's messages one batch at a time, in
offset order, and only while this consumer holds the queue's lock in the broker; SUSPEND_CURRENT_QUEUE_A_MOMENT
retries the same messages after `suspend_time_ms`.

Offsets: after each consumed batch the lowest offset still in flight is committed (to the broker for clustering,
here for broadcasting), so a crash redelivers rather than loses.

Failures (RocketMQ's rules). Clustering: a concurrent listener that returns RECONSUME_LATER or raises has its messages
sent back (core.retries.send_back): to the group's retry topic `%RETRY%<group>`, which every member subscribes to
automatically, after delay level 3 + reconsume_times (10 s, 30 s, 1 m ... 2 h), or once consumed again
`max_reconsume_times` times (the group's retry_max_times, 16, unless the option says otherwise) to `%DLQ%<group>`. A
message sent back counts as consumed here, so it no longer holds the offset back; one that could not be sent back is
consumed again here after `retry_delay_s`. `context.delay_level_when_next_consume` chooses the level (a negative one:
the dead-letter topic at once). An orderly listener that answers SUSPEND_CURRENT_QUEUE_A_MOMENT gets the same messages
again after `suspend_time_ms`, in order, until a message has been consumed again `max_reconsume_times` times: it goes to
`%DLQ%<group>` and the queue moves on. Broadcasting: a failed message is logged and dropped, as RocketMQ does (there is
no retry topic per member).

Membership: the consumer heartbeats to the broker; when its group's members change, or every
`rebalance_interval_s`, it divides the topic's queues among the live members (core.allocate) and starts or stops
pull loops to match.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import itertools
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

from core.allocate import AllocateStrategy, allocate
from core.broker import Broker
from core.client.local_offset_file import DEFAULT_INSTANCE_NAME
from core.client.message_codec import ConsumeFromWhere, MessageModel, local_host
from core.client.offset_store import OffsetStore
from core.client.process_queue import ProcessQueue
from core.compression import decode_for_consumer
from core.consumer_registry import Subscription
from core.errors import CoreError, IllegalArgumentError
from core.filter import MessageFilter, build_filter
from core.message_queue import MessageQueue
from core.results import PullStatus
from core.retries.send_back import as_consumed, ensure_retry_topic, send_back
from core.store.message import SYSFLAG_COMPRESSED, StoredMessage
from core.system_topics import RETRY_PREFIX

log = logging.getLogger(__name__)

# RocketMQ's PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL (50 ms), here how long an orderly consumer waits before it looks
# again for its queue's lock, and ..._WHEN_EXCEPTION (3 s).
FLOW_CONTROL_PAUSE_S = 0.05
PULL_ERROR_PAUSE_S = 3.0
_instances = itertools.count()


class ConsumeStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass(slots=True, init=False)
class ConsumeContext:
    """What a listener is told about its messages, and may change: `delay_level_when_next_consume` is the delay
    level of a concurrent listener's messages sent back after RECONSUME_LATER (0: the broker chooses; negative:
    the dead-letter topic at once), as RocketMQ's ConsumeConcurrentlyContext. One per listener call, so its
    __init__ is written out: mypyc compiles a class's own methods, while those the dataclass decorator generates
    run interpreted."""

    message_queue: MessageQueue
    delay_level_when_next_consume: int

    def __init__(self, message_queue: MessageQueue, delay_level_when_next_consume: int = 0) -> None:
        self.message_queue = message_queue
        self.delay_level_when_next_consume = delay_level_when_next_consume


ConcurrentListener = Callable[[list[StoredMessage], ConsumeContext], Awaitable[ConsumeStatus]]
OrderlyListener = Callable[[list[StoredMessage], ConsumeContext], Awaitable[ConsumeOrderlyStatus]]
S = TypeVar("S", ConsumeStatus, ConsumeOrderlyStatus)


@dataclass(slots=True, frozen=True)
class PushConsumerOptions:
    message_model: MessageModel = MessageModel.CLUSTERING
    consume_from: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET
    consume_timestamp_ms: int | None = None
    allocate_strategy: AllocateStrategy = AllocateStrategy.AVG
    # RocketMQ's consumeThreadMin/Max: workers start at min and grow to max while pulled messages wait (RocketMQ's
    # pool, on an unbounded queue, never grows past its core size).
    consume_thread_min: int = 20
    consume_thread_max: int = 20
    consume_message_batch_max_size: int = 1
    pull_batch_size: int = 32
    pull_threshold_for_queue: int = 1000
    pull_threshold_size_for_queue_mib: int = 100
    long_poll_ms: int = 15_000
    heartbeat_interval_s: float = 30.0
    rebalance_interval_s: float = 20.0
    lock_renew_interval_s: float = 20.0
    # A failed message that could not be sent back is consumed again here after this long (RocketMQ: 5 s).
    retry_delay_s: float = 5.0
    suspend_time_ms: int = 1000
    # Times a message is consumed again before it goes to the dead-letter topic; -1: the group's retry_max_times.
    max_reconsume_times: int = -1
    # How long shutdown waits for listener calls under way (RocketMQ's awaitTerminationMillisWhenShutdown).
    await_termination_s: float = 10.0
    # Broadcasting: offsets kept in local_offset_dir (default: the broker's config_dir/localOffsets)
    # /<instance_name>/<group>/offsets.json, one consumer per instance name and group (core.client.local_offset_file),
    # written every persist_offset_interval_s (RocketMQ's persistConsumerOffsetInterval) and at shutdown.
    instance_name: str = DEFAULT_INSTANCE_NAME
    local_offset_dir: Path | None = None
    persist_offset_interval_s: float = 5.0


class PushConsumer:
    def __init__(
        self,
        broker: Broker,
        group: str,
        listener: ConcurrentListener | OrderlyListener,
        orderly: bool = False,
        options: PushConsumerOptions | None = None,
    ) -> None:
        self.broker = broker
        self.group = group
        self.listener = listener
        self.orderly = orderly
        self.options = options or PushConsumerOptions()
        self.client_id = f"{local_host()}@{os.getpid()}@{next(_instances)}"
        self.subscriptions: dict[str, Subscription] = {}
        self._filters: dict[str, MessageFilter | None] = {}
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        options = self.options
        self.offsets = OffsetStore(
            broker,
            group,
            options.message_model,
            options.consume_from,
            options.consume_timestamp_ms,
            options.instance_name,
            options.local_offset_dir,
        )
        self._queue_tasks: dict[MessageQueue, list[asyncio.Task[None]]] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._work: asyncio.Queue[tuple[MessageQueue, ProcessQueue, list[StoredMessage]]] = asyncio.Queue()
        self._rebalance_now = asyncio.Event()
        self._running = False
        self._workers = 0
        self._stopping = False  # shutting down: start no new listener call
        self._in_listener = 0
        self._listeners_idle = asyncio.Event()

    # --- set-up ------------------------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        """Subscribe before start. A malformed expression raises FilterExpressionError here, with its position."""
        compiled = build_filter(expression_type, expression)
        self._filters[topic] = None if expression_type == "TAG" and expression in ("", "*") else compiled
        self.subscriptions[topic] = Subscription(topic, expression_type, expression)

    async def start(self) -> None:
        if not self.subscriptions:
            raise IllegalArgumentError(f"consumer group {self.group!r}: subscribe to a topic before start()")
        self.broker.groups.get_or_auto_create(self.group)
        if self.options.message_model is MessageModel.CLUSTERING:
            # Members consume their group's retry topic too (RocketMQ's copySubscription).
            retry = ensure_retry_topic(self.broker, self.group)
            self.subscriptions[retry] = Subscription(retry, "TAG", "*")
            self._filters[retry] = None
        self.offsets.load()
        self._running = True
        self._heartbeat()
        loop = asyncio.get_running_loop()
        self._tasks.append(loop.create_task(self._heartbeat_loop()))
        self._tasks.append(loop.create_task(self._rebalance_loop()))
        self._tasks.append(loop.create_task(self.offsets.persist_periodically(self.options.persist_offset_interval_s)))
        if not self.orderly:
            if not 1 <= self.options.consume_thread_min <= self.options.consume_thread_max:
                raise IllegalArgumentError("consume_thread_min must be at least 1 and at most consume_thread_max")
            for _ in range(self.options.consume_thread_min):
                self._add_worker()
        await self.rebalance()

    async def shutdown(self) -> None:
        """Stop pulling, let the listener calls under way finish, commit, leave the group."""
        if not self._running:
            return
        self._running = False
        membership = self._tasks[:2]  # heartbeat and rebalance: stopped first, so nothing takes queues back
        for task in membership:
            task.cancel()
        await asyncio.gather(*membership, return_exceptions=True)
        # Stop pulling, then give the listener calls under way time to finish so their offsets are committed
        # (RocketMQ's awaitTerminationMillisWhenShutdown); a call still running after that is redelivered later.
        pulls = [tasks[0] for tasks in self._queue_tasks.values()]
        for task in pulls:
            task.cancel()
        await asyncio.gather(*pulls, return_exceptions=True)
        self._stopping = True
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.options.await_termination_s):
                while self._in_listener:
                    self._listeners_idle.clear()
                    await self._listeners_idle.wait()
        for queue in list(self.process_queues):
            await self._drop(queue)
        await self.offsets.close()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self.broker.consumers.unregister(self.group, self.client_id)

    def _kill(self) -> None:
        """Stop dead, as a crashed process would: no final commit, no unlock, no goodbye to the broker.
        For failure tests; the broker drops this member when its heartbeats stop."""
        self._running = False
        for task in self._tasks + [t for tasks in self._queue_tasks.values() for t in tasks]:
            task.cancel()
        for pq in self.process_queues.values():
            pq.dropped = True

    # --- membership --------------------------------------------------------------------------------------

    def _heartbeat(self) -> None:
        self.broker.consumers.heartbeat(
            self.group, self.client_id, self.options.message_model.value, self.subscriptions, self._group_changed
        )

    def _group_changed(self, group: str) -> None:
        self._rebalance_now.set()

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.options.heartbeat_interval_s)
            self._heartbeat()

    async def _rebalance_loop(self) -> None:
        interval = min(self.options.rebalance_interval_s, self.options.lock_renew_interval_s)
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):  # not wait_for: see core.long_poll
                    await self._rebalance_now.wait()
            self._rebalance_now.clear()
            try:
                await self.rebalance()
            except Exception:
                log.exception("consumer %s: rebalance failed", self.client_id)

    async def rebalance(self) -> None:
        """Take the queues this member should own now; drop the others."""
        wanted: set[MessageQueue] = set()
        for topic in self.subscriptions:
            queues = self.broker.read_queues(topic)
            if self.options.message_model is MessageModel.BROADCASTING:
                mine = queues
            else:
                members = self.broker.consumers.client_ids(self.group)
                mine = allocate(self.options.allocate_strategy, self.group, self.client_id, queues, members)
            wanted.update(mine)
        for queue in [q for q in self.process_queues if q not in wanted]:
            await self._drop(queue)
        if self.orderly:
            held = self.broker.queue_locks.lock(self.group, self.client_id, wanted)
            for queue, pq in self.process_queues.items():
                pq.locked = queue in held
            wanted = held
        for queue in sorted(wanted - set(self.process_queues)):
            self._take(queue)

    def _take(self, queue: MessageQueue) -> None:
        pq = ProcessQueue()
        pq.locked = self.orderly
        self.process_queues[queue] = pq
        loop = asyncio.get_running_loop()
        tasks = [loop.create_task(self._pull_loop(queue, pq, self.offsets.start_offset(queue)))]
        if self.orderly:
            tasks.append(loop.create_task(self._consume_orderly(queue, pq)))
        self._queue_tasks[queue] = tasks
        log.info("consumer %s (%s): took %s", self.client_id, self.group, queue)

    async def _drop(self, queue: MessageQueue) -> None:
        pq = self.process_queues.pop(queue, None)
        if pq is None:
            return
        pq.dropped = True
        tasks = self._queue_tasks.pop(queue, [])
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._commit(queue, pq.commit_offset() if pq.max_pulled >= 0 else -1)
        if self.orderly:
            self.broker.queue_locks.unlock(self.group, self.client_id, [queue])
        log.info("consumer %s (%s): dropped %s", self.client_id, self.group, queue)

    # --- offsets -----------------------------------------------------------------------------------------

    def _commit(self, queue: MessageQueue, offset: int) -> None:
        if offset >= 0:
            self.offsets.commit(queue, offset)

    # --- pulling -----------------------------------------------------------------------------------------

    async def _pull_loop(self, queue: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        options = self.options
        max_bytes = options.pull_threshold_size_for_queue_mib * 1024 * 1024
        message_filter = self._filters.get(queue.topic)
        while not pq.dropped:
            if pq.full(options.pull_threshold_for_queue, max_bytes):
                # RocketMQ pulls again 50 ms later and looks again; this loop pulls as soon as consumption has made
                # room, so a consumer that drains its queue in less than 50 ms does not sit idle the rest of it
                # (a backlog was consumed at most 20,000 messages a second per queue). The bound is the same.
                await pq.room(options.pull_threshold_for_queue, max_bytes)
                continue
            try:
                result = await self.broker.pull(
                    self.group,
                    queue.topic,
                    queue.queue_id,
                    offset,
                    options.pull_batch_size,
                    message_filter,
                    options.long_poll_ms,
                )
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("consumer %s: pull from %s failed", self.client_id, queue)
                await asyncio.sleep(PULL_ERROR_PAUSE_S)
                continue
            if pq.dropped:
                return
            if result.status is PullStatus.FOUND:
                # decode_for_consumer and as_consumed change only a compressed message or one of a retry topic;
                # the others (all of them at 128 B) are tested here, not passed through two calls each.
                messages = [
                    as_consumed(decode_for_consumer(message))
                    if message.sys_flag & SYSFLAG_COMPRESSED or message.topic.startswith(RETRY_PREFIX)
                    else message
                    for message in result.messages
                ]
                pq.put(messages)
                if not self.orderly:
                    self._work.put_nowait((queue, pq, messages))
                    if self._work.qsize() > 1 and self._workers < options.consume_thread_max:
                        self._add_worker()
            elif result.status is PullStatus.OFFSET_ILLEGAL:
                log.warning(
                    "consumer %s: offset %d of %s is illegal; moving to %d",
                    self.client_id,
                    offset,
                    queue,
                    result.next_begin_offset,
                )
            elif pq.max_pulled < 0 and pq.count == 0:
                # Nothing pulled yet and nothing to commit: remember where we stand so a restart starts here.
                self._commit(queue, result.next_begin_offset)
            offset = result.next_begin_offset

    # --- consuming ---------------------------------------------------------------------------------------

    def _add_worker(self) -> None:
        self._workers += 1
        self._tasks.append(asyncio.get_running_loop().create_task(self._consume_worker()))

    async def _consume_worker(self) -> None:
        """One of `consume_thread_max` workers. A unit of work is one pull's messages: the worker hands them to
        the listener `consume_message_batch_max_size` at a time, in order, and commits once at the end; workers
        run different pulls concurrently. (A hand-off per message cost more than the pull itself.)"""
        listener: ConcurrentListener = self.listener  # type: ignore[assignment]
        batch_size = self.options.consume_message_batch_max_size
        while True:
            queue, pq, messages = await self._work.get()
            context = ConsumeContext(queue)
            for start in range(0, len(messages), batch_size):
                if pq.dropped or self._stopping:
                    break
                batch = messages[start : start + batch_size]
                status = await self._call(listener, batch, context, ConsumeStatus.RECONSUME_LATER)
                if pq.dropped:
                    break
                if status is ConsumeStatus.CONSUME_SUCCESS:
                    pq.remove(batch)
                else:
                    await self._consumed_with_failure(queue, pq, batch, context)
            if not pq.dropped:
                self._commit(queue, pq.commit_offset())

    async def _call(
        self,
        listener: Callable[[list[StoredMessage], ConsumeContext], Awaitable[S]],
        batch: list[StoredMessage],
        context: ConsumeContext,
        on_error: S,
    ) -> S:
        """Call the listener, counted as under way (shutdown waits for those); an exception means `on_error`:
        the messages are consumed again later."""
        self._in_listener += 1
        try:
            return await listener(batch, context)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(
                "consumer %s: listener failed on %s; answering %s", self.client_id, context.message_queue, on_error
            )
            return on_error
        finally:
            self._in_listener -= 1
            # Only shutdown waits on this, and it looks at the count before it waits: an Event.set per message
            # while running (one listener call per message by default) would wake nobody.
            if self._stopping:
                self._listeners_idle.set()

    async def _consumed_with_failure(
        self, queue: MessageQueue, pq: ProcessQueue, batch: list[StoredMessage], context: ConsumeContext
    ) -> None:
        """RECONSUME_LATER (or an exception) for `batch`: send each message back; those sent back are done here."""
        if self.options.message_model is MessageModel.BROADCASTING:
            log.warning(
                "consumer %s (%s): broadcasting consumption of %d messages of %s failed; dropped, as RocketMQ does",
                self.client_id,
                self.group,
                len(batch),
                queue,
            )
            pq.remove(batch)
            return
        kept = []
        for message in batch:
            try:
                await send_back(
                    self.broker,
                    message,
                    self.group,
                    delay_level=context.delay_level_when_next_consume,
                    max_reconsume_times=self.options.max_reconsume_times,
                )
            except CoreError as exc:
                log.warning(
                    "consumer %s: message %s could not be sent back (%s)", self.client_id, message.unique_id, exc
                )
                kept.append(message)
        pq.remove([message for message in batch if message not in kept])
        if kept:
            self._redeliver_later(queue, pq, kept)

    def _redeliver_later(self, queue: MessageQueue, pq: ProcessQueue, batch: list[StoredMessage]) -> None:
        again = [replace(message, reconsume_times=message.reconsume_times + 1) for message in batch]
        for message in again:
            if message.queue_offset in pq.messages:
                pq.messages[message.queue_offset] = message
        asyncio.get_running_loop().call_later(self.options.retry_delay_s, self._work.put_nowait, (queue, pq, again))

    def _max_reconsume_times(self) -> int:
        given = self.options.max_reconsume_times
        return given if given >= 0 else self.broker.groups.get_or_auto_create(self.group).retry_max_times

    async def _dead_letter_exhausted(self, batch: list[StoredMessage]) -> list[StoredMessage]:
        """Orderly: send the messages of `batch` consumed again max_reconsume_times times to the dead-letter topic;
        return those left to consume again (the others, and any that could not be sent)."""
        limit = self._max_reconsume_times()
        left = []
        for message in batch:
            if message.reconsume_times < limit:
                left.append(message)
                continue
            try:
                await send_back(self.broker, message, self.group, delay_level=-1, max_reconsume_times=limit)
            except CoreError as exc:
                log.warning(
                    "consumer %s: message %s could not be dead-lettered (%s)", self.client_id, message.unique_id, exc
                )
                left.append(message)
            else:
                log.warning(
                    "consumer %s (%s): message %s was suspended %d times; sent to the dead-letter topic",
                    self.client_id,
                    self.group,
                    message.unique_id,
                    message.reconsume_times,
                )
        return left

    async def _consume_orderly(self, queue: MessageQueue, pq: ProcessQueue) -> None:
        listener: OrderlyListener = self.listener  # type: ignore[assignment]
        batch_size = self.options.consume_message_batch_max_size
        while not pq.dropped and not self._stopping:
            if not pq.locked:
                await asyncio.sleep(FLOW_CONTROL_PAUSE_S)
                continue
            batch = pq.take_in_order(batch_size)
            if not batch:
                pq.arrived.clear()
                await pq.arrived.wait()
                continue
            context = ConsumeContext(queue)
            while not self._stopping:
                status = await self._call(listener, batch, context, ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT)
                if status is ConsumeOrderlyStatus.SUCCESS:
                    pq.remove(batch)
                    self._commit(queue, pq.commit_offset())
                    break
                left = await self._dead_letter_exhausted(batch)
                if len(left) < len(batch):
                    left_ids = {id(message) for message in left}
                    pq.remove([message for message in batch if id(message) not in left_ids])
                    self._commit(queue, pq.commit_offset())
                if not left:
                    break
                await asyncio.sleep(self.options.suspend_time_ms / 1000)
                batch = [replace(message, reconsume_times=message.reconsume_times + 1) for message in left]
