"""The push consumer over remoting (RocketMQ's DefaultMQPushConsumer on a cluster), clustering or broadcasting,
concurrent or orderly: core.PushConsumer's calls (subscribe, start, shutdown), its listeners (messages,
ConsumeContext) -> ConsumeStatus or ConsumeOrderlyStatus, and its options (core.PushConsumerOptions).

Rebalance (RocketMQ's RebalancePushImpl): at start, when a broker says the group's members changed
(NOTIFY_CONSUMER_IDS_CHANGED), when a topic's route changes, and every `rebalance_interval_s` (20 s), each member
lists every group's read queues of its topics (and of the group's retry topic, `%RETRY%group`, which every member
reads), asks a broker of the topic for the group's members (GET_CONSUMER_LIST_BY_GROUP) and takes its share by
core's allocation (AVG by default: the same answer in every member, Java ones included). A queue it no longer owns is
dropped: its pulls stop and its offset is written first; a new one is read from its committed offset (or where
consume_from says).

Each owned queue has a pull loop (PULL_MESSAGE long-polled 15 s, the committed offset carried along) that pauses
while the queue holds `pull_threshold_for_queue` messages; `consume_thread_max` worker tasks call the listener. A
message is done when the listener says CONSUME_SUCCESS; on RECONSUME_LATER (or an exception) it is sent back
(CONSUMER_SEND_MSG_BACK: to the retry topic with the context's delay level, or the dead-letter topic past
`max_reconsume_times`), and consumed again here after `retry_delay_s` if that fails. The committed offset is the
lowest in flight (offset_store.py writes it every 5 s and at shutdown): a crash repeats, never loses.

Orderly (RocketMQ's ConsumeMessageOrderlyService): a queue is consumed only while this member holds its lock at its
broker (LOCK_BATCH_MQ at each rebalance, which runs every `lock_renew_interval_s` too; UNLOCK_BATCH_MQ when it lets
the queue go), one message at a time in offset order; SUSPEND_CURRENT_QUEUE_A_MOMENT gives the same message again
after `suspend_time_ms`, until it was consumed again `max_reconsume_times` times (-1: 16): then it goes to the
dead-letter topic and the queue moves on.

Broadcasting: every member reads every queue of every group, keeps its own offsets (in `local_offset_dir`, default
~/.rocketmq_offsets, /<instance_name>/<group>/offsets.json, written every 5 s and at shutdown), takes no locks, and
drops a message it failed (logged), as RocketMQ does: there is no retry topic per member.

Not here yet, and refused at construction, naming the option: batches of more than one message per listener call,
a heartbeat interval other than the Cluster's (which heartbeats for every producer and consumer of the process);
core.PushConsumer has them in process.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from core import (
    RETRY_PREFIX,
    ConsumeContext,
    ConsumeOrderlyStatus,
    ConsumeStatus,
    CoreError,
    IllegalArgumentError,
    MessageModel,
    MessageQueue,
    PullStatus,
    PushConsumerOptions,
    StoredMessage,
    allocate,
    build_filter,
    local_offset_path,
)
from remote_client.cluster import Cluster, ConsumerEntry
from remote_client.offset_store import PERSIST_INTERVAL_S, RemoteOffsetStore
from remote_client.pull_request import pull_request, pull_result
from remote_client.replies import check
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.java_json import loads

log = logging.getLogger(__name__)

FLOW_CONTROL_PAUSE_S = 0.05
PULL_ERROR_PAUSE_S = 3.0
PULL_TIMEOUT_MARGIN_S = 5.0
# Where a broadcasting member keeps its offsets unless options.local_offset_dir says (RocketMQ's
# rocketmq.client.localOffsetStoreDir: ~/.rocketmq_offsets/<instance>/<group>/offsets.json).
LOCAL_OFFSET_DIR = ".rocketmq_offsets"

Listener = Callable[[list[StoredMessage], ConsumeContext], Awaitable[ConsumeStatus]]
OrderlyListener = Callable[[list[StoredMessage], ConsumeContext], Awaitable[ConsumeOrderlyStatus]]
# An orderly consumer's message suspended this many times goes to the dead-letter topic (max_reconsume_times -1:
# core's default retry_max_times, which the group's own would be in process).
DEFAULT_MAX_RECONSUME_TIMES = 16


class _QueueState:
    """One owned queue: the offsets pulled and not yet consumed (the lowest is the commit point)."""

    def __init__(self, next_offset: int) -> None:
        self.next_offset = next_offset
        self.in_flight: set[int] = set()
        self.bytes = 0  # of the bodies in flight
        self.dropped = False
        # Orderly: the messages pulled and not consumed, by offset; woken when more arrive; whether its lock is held.
        self.pending: dict[int, StoredMessage] = {}
        self.arrived = asyncio.Event()
        self.locked = False

    def commit_point(self) -> int:
        return min(self.in_flight) if self.in_flight else self.next_offset


class PushConsumer:
    def __init__(
        self,
        cluster: Cluster,
        group: str,
        listener: Listener | OrderlyListener,
        orderly: bool = False,
        options: PushConsumerOptions | None = None,
    ) -> None:
        options = options or PushConsumerOptions()
        _refuse_what_is_not_served(cluster, options)
        self.cluster = cluster
        self.group = group
        self.listener = listener
        self.orderly = orderly
        self.options = options
        self.broadcasting = options.message_model is MessageModel.BROADCASTING
        self.subscriptions: dict[str, tuple[str, str]] = {}
        local_file = None
        if self.broadcasting:
            directory = options.local_offset_dir or Path.home() / LOCAL_OFFSET_DIR
            local_file = local_offset_path(directory, options.instance_name, group)
        self.offsets = RemoteOffsetStore(cluster, group, options.consume_from, options.consume_timestamp_ms,
                                         self.broadcasting, local_file)  # fmt: skip
        self.queues: dict[MessageQueue, _QueueState] = {}
        self._pulls: dict[MessageQueue, asyncio.Task[None]] = {}
        self._orderly: dict[MessageQueue, asyncio.Task[None]] = {}
        self._work: asyncio.Queue[tuple[MessageQueue, _QueueState, StoredMessage]] = asyncio.Queue()
        self._tasks: list[asyncio.Task[None]] = []
        self._rebalance_now = asyncio.Event()
        self._rebalancing = asyncio.Lock()
        self._running = False
        self._busy = 0

    def subscribe(self, topic: str, expression: str = "*", expression_type: str = "TAG") -> None:
        """Subscribe before start; a malformed expression raises FilterExpressionError here."""
        build_filter(expression_type, expression)
        self.subscriptions[topic] = (expression_type, expression)

    async def start(self) -> None:
        if not self.subscriptions:
            raise IllegalArgumentError(f"consumer group {self.group!r}: subscribe to a topic before start()")
        await self.cluster.start()
        for topic in self.subscriptions:
            await self.cluster.route(topic)  # an unknown topic fails here, as in process
        if not self.broadcasting:  # members read their group's retry topic too (RocketMQ's copySubscription)
            self.subscriptions[RETRY_PREFIX + self.group] = ("TAG", "*")
        self.offsets.load()
        entry = ConsumerEntry(self.group, "CONSUME_PASSIVELY", self.options.message_model.value,
                              f"CONSUME_FROM_{self.options.consume_from.name}", dict(self.subscriptions),
                              self._rebalance_now.set)  # fmt: skip
        self.cluster.remove_consumer(self.group)
        self.cluster.add_consumer(entry)
        self._running = True
        await self.cluster.heartbeat()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._rebalance_loop()),
                       loop.create_task(self.offsets.persist_periodically(PERSIST_INTERVAL_S))]  # fmt: skip
        if not self.orderly:
            self._tasks += [loop.create_task(self._worker()) for _ in range(self.options.consume_thread_max)]
        await self.rebalance()

    async def shutdown(self) -> None:
        """Stop pulling, let listener calls under way finish, write the offsets, leave the group (and, orderly, let
        the queues' locks go)."""
        if not self._running:
            return
        self._running = False
        self._tasks[0].cancel()
        for task in self._pulls.values():
            task.cancel()
        await asyncio.gather(self._tasks[0], *self._pulls.values(), return_exceptions=True)
        for state in self.queues.values():
            state.locked = False  # an orderly consumer takes no next message
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.options.await_termination_s):
                while self._busy or not self._work.empty():
                    await asyncio.sleep(0.05)
        for queue, state in self.queues.items():
            self.offsets.commit(queue, state.commit_point())
        for task in [*self._tasks[1:], *self._orderly.values()]:
            task.cancel()
        await asyncio.gather(*self._tasks[1:], *self._orderly.values(), return_exceptions=True)
        await self.offsets.close()
        if self.orderly and not self.broadcasting:
            for queue in list(self.queues):
                await self._unlock(queue)
        self.cluster.remove_consumer(self.group)
        await self.cluster.unregister_group("consumerGroup", self.group)

    # --- rebalance ---

    async def _rebalance_loop(self) -> None:
        interval = self.options.rebalance_interval_s
        if self.orderly:  # each rebalance renews the locks (RocketMQ's lockAll every 20 s)
            interval = min(interval, self.options.lock_renew_interval_s)
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval):
                    await self._rebalance_now.wait()
            self._rebalance_now.clear()
            try:
                await self.rebalance()
            except Exception as exc:
                log.warning("group %s: rebalance failed: %s; again at the next one", self.group, exc)

    async def _members(self, topic: str) -> list[str]:
        route = await self.cluster.route(topic)
        for name in sorted(route.brokers):
            if not route.brokers[name].addresses:
                continue
            request = RemotingCommand(RequestCode.GET_CONSUMER_LIST_BY_GROUP, ext_fields={"consumerGroup": self.group})
            try:
                reply = await self.cluster.call_any(name, request)
                return sorted(str(cid) for cid in loads(reply.body).get("consumerIdList") or ())
            except CoreError as exc:
                log.info("group %s: broker %s does not list the members: %s", self.group, name, exc)
        return []

    async def rebalance(self) -> None:
        # One at a time: the periodic one, a broker's notice and start() may ask at once, and two that both found a
        # queue missing would each start a pull loop for it (every message then consumed twice).
        async with self._rebalancing:
            await self._rebalance()

    async def _rebalance(self) -> None:
        wanted: set[MessageQueue] = set()
        for topic in list(self.subscriptions):
            try:
                route = await self.cluster.route(topic, refresh=True)
            except CoreError:
                continue  # the retry topic before its first message, or a topic gone
            if self.broadcasting:  # every member reads every queue
                wanted.update(route.read_queues())
                continue
            members = await self._members(topic)
            if self.cluster.client_id not in members:
                members.append(self.cluster.client_id)  # its own heartbeat may not have reached that broker yet
            wanted.update(allocate(self.options.allocate_strategy, self.group, self.cluster.client_id,
                                   route.read_queues(), members))  # fmt: skip
        for queue in [q for q in self.queues if q not in wanted]:
            await self._drop(queue)
        if self.orderly and not self.broadcasting:  # a broadcasting member is alone on its queues: no locks
            held = await self._lock(wanted)
            for queue, state in self.queues.items():
                state.locked = queue in held
            wanted = held
        for queue in sorted(wanted - self.queues.keys()):
            if self._running:
                state = _QueueState(await self.offsets.start_offset(queue))
                state.locked = self.orderly
                self.queues[queue] = state
                loop = asyncio.get_running_loop()
                self._pulls[queue] = loop.create_task(self._pull_loop(queue, state))
                if self.orderly:
                    self._orderly[queue] = loop.create_task(self._consume_orderly(queue, state))
                log.info("group %s: %s took %s", self.group, self.cluster.client_id, queue)

    async def _lock(self, queues: set[MessageQueue]) -> set[MessageQueue]:
        """Lock (or renew) the queues at their brokers (LOCK_BATCH_MQ); those this consumer holds now."""
        held: set[MessageQueue] = set()
        for broker in sorted({queue.broker_name for queue in queues}):
            mine = sorted(queue for queue in queues if queue.broker_name == broker)
            body = {
                "consumerGroup": self.group,
                "clientId": self.cluster.client_id,
                "mqSet": [_queue_json(q) for q in mine],
            }
            try:
                reply = check(await self.cluster.invoke(broker, RemotingCommand(RequestCode.LOCK_BATCH_MQ,
                                                                                body=json.dumps(body).encode())),
                              f"broker {broker}")  # fmt: skip
            except CoreError as exc:
                log.info("group %s: locking queues at broker %s failed: %s", self.group, broker, exc)
                continue
            for item in loads(reply.body).get("lockOKMQSet") or ():
                held.add(MessageQueue(str(item["topic"]), str(item["brokerName"]), int(item["queueId"])))
        return held

    async def _unlock(self, queue: MessageQueue) -> None:
        body = {"consumerGroup": self.group, "clientId": self.cluster.client_id, "mqSet": [_queue_json(queue)]}
        with contextlib.suppress(CoreError):
            await self.cluster.invoke(queue.broker_name, RemotingCommand(RequestCode.UNLOCK_BATCH_MQ,
                                                                         body=json.dumps(body).encode()))  # fmt: skip

    async def _drop(self, queue: MessageQueue) -> None:
        state = self.queues.pop(queue)
        state.dropped = True
        tasks = [self._pulls.pop(queue)] + ([self._orderly.pop(queue)] if queue in self._orderly else [])
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.offsets.commit(queue, state.commit_point())
        await self.offsets.release(queue)
        if self.orderly and not self.broadcasting:
            await self._unlock(queue)
        log.info("group %s: %s let go of %s", self.group, self.cluster.client_id, queue)

    # --- pulling and consuming ---

    async def _pull_loop(self, queue: MessageQueue, state: _QueueState) -> None:
        options = self.options
        expression_type, expression = self.subscriptions.get(queue.topic, ("TAG", "*"))
        while not state.dropped:
            if (
                len(state.in_flight) >= options.pull_threshold_for_queue
                or state.bytes >= options.pull_threshold_size_for_queue_mib << 20
            ):
                await asyncio.sleep(FLOW_CONTROL_PAUSE_S)
                continue
            request = pull_request(self.group, queue, state.next_offset, options.pull_batch_size, expression,
                                   expression_type, options.long_poll_ms, state.commit_point())  # fmt: skip
            timeout = self.cluster.request_timeout_s + options.long_poll_ms / 1000 + PULL_TIMEOUT_MARGIN_S
            try:
                result = pull_result(await self.cluster.invoke_read(queue, request, timeout),
                                     f"broker {queue.broker_name}")  # fmt: skip
            except CoreError as exc:
                log.info("group %s: pulling %s failed: %s", self.group, queue, exc)
                self.cluster.forget_route(queue.topic)
                self._rebalance_now.set()
                await asyncio.sleep(PULL_ERROR_PAUSE_S)
                continue
            if result.status is PullStatus.FOUND:
                for message in result.messages:
                    state.in_flight.add(message.queue_offset)
                    state.bytes += len(message.body)
                    if self.orderly:
                        state.pending[message.queue_offset] = message
                    else:
                        self._work.put_nowait((queue, state, message))
                if self.orderly:
                    state.arrived.set()
            state.next_offset = result.next_begin_offset

    async def _consume_orderly(self, queue: MessageQueue, state: _QueueState) -> None:
        """One message at a time in offset order, while the queue's lock is held; SUSPEND_CURRENT_QUEUE_A_MOMENT
        gives the same message again after suspend_time_ms, until it was consumed again max_reconsume_times times:
        then it goes to the dead-letter topic and the queue moves on."""
        listener: OrderlyListener = self.listener  # type: ignore[assignment]
        limit = self.options.max_reconsume_times
        limit = DEFAULT_MAX_RECONSUME_TIMES if limit < 0 else limit
        while not state.dropped:
            if not state.locked or not state.pending:
                state.arrived.clear()
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(FLOW_CONTROL_PAUSE_S if not state.locked else None):
                        await state.arrived.wait()
                continue
            message = state.pending[min(state.pending)]
            context = ConsumeContext(queue)
            self._busy += 1
            try:
                suspended = 0
                while not state.dropped:
                    try:
                        status = await listener([message], context)
                    except Exception:
                        log.exception("group %s: the orderly listener raised on %s; suspended", self.group, queue)
                        status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                    if status is ConsumeOrderlyStatus.SUCCESS:
                        break
                    suspended += 1
                    if message.reconsume_times + suspended > limit:
                        context.delay_level_when_next_consume = -1  # the dead-letter topic
                        if self.broadcasting or await self._send_back(message, context):
                            break
                    await asyncio.sleep(self.options.suspend_time_ms / 1000)
            finally:
                self._busy -= 1
            if state.dropped:
                return
            del state.pending[message.queue_offset]
            state.in_flight.discard(message.queue_offset)
            state.bytes -= len(message.body)
            self.offsets.commit(queue, state.commit_point())

    async def _worker(self) -> None:
        while True:
            queue, state, message = await self._work.get()
            self._busy += 1
            try:
                await self._consume(queue, state, message)
            finally:
                self._busy -= 1

    async def _consume(self, queue: MessageQueue, state: _QueueState, message: StoredMessage) -> None:
        context = ConsumeContext(queue)
        try:
            status = await self.listener([message], context)
        except Exception:
            log.exception("group %s: the listener raised on %s; consumed again later", self.group, queue)
            status = ConsumeStatus.RECONSUME_LATER
        if status is not ConsumeStatus.CONSUME_SUCCESS and self.broadcasting:
            log.warning("group %s: %s failed in broadcasting and is dropped, as RocketMQ does", self.group,
                        message.unique_id)  # fmt: skip
        elif status is not ConsumeStatus.CONSUME_SUCCESS and not await self._send_back(message, context):
            await asyncio.sleep(self.options.retry_delay_s)
            if not state.dropped:
                self._work.put_nowait((queue, state, message))
            return
        if message.queue_offset in state.in_flight:
            state.in_flight.discard(message.queue_offset)
            state.bytes -= len(message.body)
        if not state.dropped:
            self.offsets.commit(queue, state.commit_point())

    async def _send_back(self, message: StoredMessage, context: ConsumeContext) -> bool:
        fields = {"offset": str(message.commit_log_offset), "group": self.group,
                  "delayLevel": str(context.delay_level_when_next_consume), "originMsgId": message.unique_id or "",
                  "originTopic": message.topic, "unitMode": "false",
                  "maxReconsumeTimes": str(self.options.max_reconsume_times)}  # fmt: skip
        broker = context.message_queue.broker_name
        try:
            reply = await self.cluster.invoke(broker, RemotingCommand(RequestCode.CONSUMER_SEND_MSG_BACK,
                                                                      ext_fields=fields))  # fmt: skip
            check(reply, f"broker {broker}")
            return True
        except CoreError as exc:
            log.warning("group %s: sending back %s failed (%s); consumed again here", self.group,
                        message.unique_id, exc)  # fmt: skip
            return False


def _queue_json(queue: MessageQueue) -> dict[str, object]:
    return {"topic": queue.topic, "brokerName": queue.broker_name, "queueId": queue.queue_id}


def _refuse_what_is_not_served(cluster: Cluster, options: PushConsumerOptions) -> None:
    if options.consume_message_batch_max_size != 1:
        raise IllegalArgumentError(
            f"consume_message_batch_max_size {options.consume_message_batch_max_size}: a remote push consumer calls its"
            " listener with one message at a time for now"
        )
    if options.heartbeat_interval_s != cluster.heartbeat_s:
        raise IllegalArgumentError(
            f"heartbeat_interval_s {options.heartbeat_interval_s}: the Cluster heartbeats every {cluster.heartbeat_s} s"
            " for all its producers and consumers; give Cluster(heartbeat_s=...) instead"
        )
    if not 1 <= options.consume_thread_min <= options.consume_thread_max:
        raise IllegalArgumentError("consume_thread_min must be at least 1 and at most consume_thread_max")
