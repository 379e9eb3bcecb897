"""The broker: topics, sending, pulling with long polling and consumer offsets on top of the message store.

It plays the parts of RocketMQ's BrokerController, SendMessageProcessor and PullMessageProcessor, in process and
on one event loop: the client API (core.client) and every front door call these coroutines. Configuration
lives in `config_dir` as RocketMQ's JSON files (topics.json, subscriptionGroup.json, consumerOffset.json).

Every refusal is a core.errors.CoreError: the store's own errors are translated where the broker calls the
store (core.errors.from_store_error), keeping the store error as `__cause__` and its message. Front doors take
part in sending through two callbacks: send hooks name the light queues a message is also dispatched to, stored
listeners (core.stored_listeners) hear of every message appended, in store order. Which broker service parks a
delayed, timer or transactional message is core.parking's choice.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

from core.batch_send import MAX_BATCH_BYTES as MAX_BATCH_BYTES
from core.batch_send import batch_bytes, name_queues_and_ids, refuse_parked, send_results
from core.broker_admin import BrokerAdmin
from core.broker_config import BrokerConfig
from core.clock import Clock, SystemClock
from core.consumer_registry import ConsumerRegistry, ConsumeType, GroupListener, Subscription
from core.errors import (
    IllegalArgumentError,
    IllegalMessageError,
    NoPermissionError,
    TopicNotFoundError,
    from_store_error,
)
from core.filter import MessageFilter
from core.long_poll import LongPollWaiters
from core.message_queries import MessageQueries
from core.message_queue import MessageQueue
from core.parking import parking_for
from core.queue_locks import QueueLocks
from core.queue_pull import pull_queue
from core.replication.master_copy import MasterCopy
from core.replication.master_services import MasterServices
from core.replication.role import Replication
from core.results import PullResult, Route, SendResult, SendStatus
from core.retries.dead_letters import DeadLetters
from core.scheduling.delay_levels import ScheduleService, parse_delay_levels
from core.scheduling.recalls import RecallTable
from core.scheduling.timers import TimerService
from core.send_hooks import SendHook, name_light_queues
from core.store.config import BrokerRole
from core.store.errors import StoreError
from core.store.message import (
    PROPERTY_MULTI_DISPATCH,
    PROPERTY_UNIQ_KEY,
    Message,
    is_light_queue,
)
from core.store.message_id import UniqueIdGenerator
from core.store.message_store import MessageStore, PutStatus, RecoveryReport
from core.store.service_thread import PeriodicService
from core.stored_listeners import StoredListener, StoredListeners, waits
from core.system_topics import PARKING_PROPERTIES, PROPERTY_REAL_TOPIC
from core.tables.consumer_offsets import ConsumerOffsetManager
from core.tables.subscription_group import SubscriptionGroupManager
from core.tables.topic_config import MessageType, Perm, TopicConfig, TopicConfigManager
from core.traffic import TopicTraffic, refusal_reason
from core.transactions.service import TransactionService

log = logging.getLogger(__name__)

# RocketMQ's limit: a pull returns at most 32 messages by default (pullBatchSize); a batch's (MAX_BATCH_BYTES) is
# checked in core.batch_send.
DEFAULT_PULL_BATCH = 32

Service = TypeVar("Service")


def open_store(store: MessageStore) -> RecoveryReport:
    """Open `store`, recovering it after a crash (MessageStore.open), with the core's errors: StorageError when
    another process has it open or a file of it cannot be used."""
    try:
        return store.open()
    except StoreError as exc:
        raise from_store_error(exc) from exc


class Broker:
    def __init__(
        self,
        store: MessageStore,
        config_dir: Path,
        config: BrokerConfig | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.store = store
        self.config = config or BrokerConfig()
        self.config_dir = config_dir
        # The clock of scheduled work (delay levels, timers, transaction checks); tests pass a ManualClock.
        self.clock: Clock = clock or SystemClock()
        self.topics = TopicConfigManager(config_dir, self.config.auto_create_topic, self.config.default_queue_nums)
        self.groups = SubscriptionGroupManager(config_dir, self.config.auto_create_group)
        self.offsets = ConsumerOffsetManager(config_dir)
        self.ids = UniqueIdGenerator(store.config.store_host)
        self.consumers = ConsumerRegistry(self.config.consumer_expire_s)
        self.queue_locks = QueueLocks(self.config.queue_lock_expire_s)
        self._long_poll: LongPollWaiters | None = None
        self._offset_persister = PeriodicService(
            "mqgate-offsets", self.config.offset_persist_interval_s, self.offsets.persist
        )
        self._scanner: asyncio.Task[None] | None = None
        # Routes by topic: a new, empty dictionary each time the topic table changes (in whichever thread changed
        # it, after the new table is what readers get).
        self._routes: dict[str, Route] = {}
        self.topics.add_change_listener(self._topics_changed)
        self._send_hooks: list[SendHook] = []
        self._stored = StoredListeners(store)
        # The list of `_stored`, which the send path tests for emptiness, itself: no call per send.
        self._stored_listeners = self._stored.listeners
        # Taken once: MessageStore.append is the store's compiled appender's bound method, and a send makes no
        # attribute look-up for it.
        self._append = store.append
        self._sync = store.acks_wait
        self._arrival_listeners: list[Callable[[set[tuple[str, int]]], None]] = []
        # Delay-level and timer messages recalled before they are due (core.scheduling.recalls): the services drop
        # them. A handle further ahead than the longest level or timer was not made here.
        self.recalls = RecallTable(
            self,
            self.config.broker_name,
            max([self.config.timer_max_delay_s * 1000, *parse_delay_levels(self.config.message_delay_level)]),
        )
        self.schedule = ScheduleService(self, self.config.message_delay_level, self.recalls)
        # A slave's copies of its master's tables, which its remoting door takes every 10 s.
        self.timers = TimerService(self, self.config, self.recalls)
        self.master_copy = MasterCopy(self.topics, self.groups, self.offsets, self.schedule, self.timers)
        self.transactions = TransactionService(self, self.config)
        # Delay levels, timers, recalls and transaction checks run on the group's master only.
        self.master_services = MasterServices(self.recalls, self.schedule, self.timers, self.transactions)
        # The broker's place in its group: its role, its HA port or master, reads a slave should serve, and the
        # role's changes under automatic failover.
        self.ha = Replication(store, self._start_master_services, self.master_services.close, self._role_changed)
        # Admin look-ups and dead letters (core.message_queries, core.retries.dead_letters): no state of their own to
        # start.
        self.queries = MessageQueries(self)
        self.dead_letters = DeadLetters(self)
        self.admin = BrokerAdmin(self)
        # Messages and bytes in and out per topic, store refusals by reason (core.traffic): read by mqgate's metrics.
        self.traffic = TopicTraffic()
        self._shared: dict[type, object] = {}

    def shared(self, kind: type[Service], make: Callable[[], Service]) -> Service:
        """The broker's one service of class `kind`, made by `make` on first use and kept while the broker lives:
        services that must be one per broker (core.pop.service's PopService, the EventBridge router) are found here."""
        service = self._shared.get(kind)
        if service is None:
            service = self._shared[kind] = make()
        assert isinstance(service, kind)
        return service

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._long_poll = LongPollWaiters(loop)
        self.store.add_dispatch_listener(self._long_poll.notify_threadsafe)

        def arrived(queues: set[tuple[str, int]]) -> None:
            if self._arrival_listeners:
                with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens any more
                    loop.call_soon_threadsafe(self._notify_arrival, queues)

        self.store.add_dispatch_listener(arrived)
        self._offset_persister.start()
        self._scanner = asyncio.get_running_loop().create_task(self._scan_consumers())
        # Parked messages: everything appended before this start must be in its queues and the index first, so the
        # services rebuild their state from it and find the copies a crash left in doubt.
        while not await self.wait_visible(timeout_s=60.0):
            log.warning("broker start: the store is still dispatching what recovery found; parked messages wait")
        if self.ha.role is not BrokerRole.SLAVE:
            # A slave holds their records (and copies their progress) to take over if it is elected.
            await self._start_master_services()

    async def _start_master_services(self) -> None:
        await self.master_services.start(self._recalls_settled_before)

    def _role_changed(self) -> None:
        """The store's role changed (automatic failover): whether sends wait follows it."""
        self._sync = self.store.acks_wait

    def _recalls_settled_before(self) -> int:
        return min(self.timers.settled_before_ms(), self.schedule.settled_before_ms())

    async def close(self) -> None:
        await self.master_services.close()
        if self._scanner is not None:
            self._scanner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scanner
        if self._long_poll is not None:
            self._long_poll.wake_all()
        self._offset_persister.stop()
        self.offsets.persist()

    async def _scan_consumers(self) -> None:
        while True:
            await asyncio.sleep(self.config.consumer_scan_interval_s)
            self.consumers.expire()

    # --- topics ------------------------------------------------------------------------------------------

    def create_topic(
        self,
        topic: str,
        queue_nums: int | None = None,
        message_type: MessageType = MessageType.NORMAL,
        perm: Perm = Perm.READ | Perm.WRITE,
    ) -> TopicConfig:
        nums = queue_nums or self.config.default_queue_nums
        config = TopicConfig(
            topic_name=topic, read_queue_nums=nums, write_queue_nums=nums, perm=perm, message_type=message_type
        )
        self.topics.create_or_update(config)
        return config

    def topic_config(self, topic: str) -> TopicConfig:
        config = self.topics.get(topic)
        if config is None:
            raise TopicNotFoundError(f"topic {topic!r} does not exist", topic)
        return config

    def has_topic(self, topic: str) -> bool:
        return self.topics.get(topic) is not None

    def topic_configs(self) -> list[TopicConfig]:
        """Every topic's configuration (a copy of the list: topics may be created while it is read)."""
        return list(self.topics.list())

    def create_groups(self, groups: Iterable[str]) -> int:
        """Create those consumer groups that do not exist yet, with the defaults, in one write of
        subscriptionGroup.json (one write per group would rewrite the table N times), whatever auto_create_group
        says: a front door that owns thousands of groups starts them so. The number created."""
        return self.groups.create_missing(groups)

    def join_group(
        self, group: str, client_id: str, topics: Iterable[str] = (), consume_type: ConsumeType = ConsumeType.PULL
    ) -> None:
        """`client_id`, a reader inside this process (or a pop client of the gRPC endpoint), reads `group` from now
        on: a live member of it (`admin.members`) until `leave_group`. It does not heartbeat and never expires, so
        it must leave when it stops reading. PULL and PUSH members make offset resets of the group wait for them."""
        self.consumers.join(group, client_id, topics, consume_type)

    def leave_group(self, group: str, client_id: str) -> None:
        """`client_id` stopped reading `group` (nothing happens if it was no member)."""
        self.consumers.unregister(group, client_id)

    def consumer_heartbeat(
        self,
        group: str,
        client_id: str,
        message_model: str,
        subscriptions: dict[str, Subscription],
        on_change: GroupListener | None = None,
    ) -> None:
        """A consumer of another process heartbeats (a RocketMQ 4 client of the remoting port): a live member of
        `group` until it leaves (`leave_group`) or is silent for consumer_expire_s. `on_change` hears, with the
        group's name, of every change of the group's members (RocketMQ's NOTIFY_CONSUMER_IDS_CHANGED)."""
        self.consumers.heartbeat(group, client_id, message_model, subscriptions, on_change)

    def add_topic_listener(self, listener: Callable[[], None]) -> None:
        """`listener` is called after the topic table changes (a topic created, changed or deleted), in whichever
        thread changed it: a door that tells others about the topics (the broker's NameServer registration)."""
        self.topics.add_change_listener(listener)

    def delete_group_offsets(self, group: str, topic: str | None = None) -> None:
        """Forget every offset a consumer group committed (the group is gone for good), or those in `topic` only."""
        self.offsets.delete_group(group, topic)

    def delete_topic(self, topic: str) -> bool:
        deleted = self.topics.delete(topic)
        self.store.delete_topic(topic)
        return deleted

    def delete_light_queue(self, name: str) -> None:
        """Drop a light queue's entries and every group's offset in it (its records stay in the log)."""
        if not is_light_queue(name):
            raise IllegalArgumentError(f"{name!r} is not a light queue name (those start with %LMQ%)")
        self.store.delete_topic(name)
        self.offsets.delete_topic(name)

    def route(self, topic: str) -> Route:
        """The topic's queues and permissions, auto-creating the topic if allowed. Cached until the topic table
        changes: a send asks for it every time."""
        # Kept in the dictionary read first: a config read after it is at least as new as the table it was made
        # for, and a change meanwhile replaces that dictionary, dropping the route with it.
        routes = self._routes
        route = routes.get(topic)
        if route is None:
            route = routes[topic] = Route.of(self.topics.get_or_auto_create(topic), self.config.broker_name)
        return route

    def _topics_changed(self) -> None:
        self._routes = {}

    def write_queues(self, topic: str) -> list[MessageQueue]:
        """The queues a producer may send to (RocketMQ's publish route); auto-creates the topic if allowed."""
        return self.route(topic).write_queues

    def read_queues(self, topic: str) -> list[MessageQueue]:
        """The queues consumers divide among themselves (RocketMQ's subscribe route)."""
        self.topic_config(topic)
        return self.route(topic).read_queues

    # --- sending -----------------------------------------------------------------------------------------

    def add_arrival_listener(self, listener: Callable[[set[tuple[str, int]]], None]) -> None:
        """Call `listener(queues)` on the event loop with the (topic, queue id) pairs that got messages, once
        per dispatch round: front doors that push messages to their clients wake up on it."""
        self._arrival_listeners.append(listener)

    def _notify_arrival(self, queues: set[tuple[str, int]]) -> None:
        for listener in self._arrival_listeners:
            try:
                listener(queues)
            except Exception:
                log.exception("arrival listener %r failed", listener)

    def add_send_hook(self, hook: SendHook) -> None:
        """Call `hook(message)` on every message before it is stored, whoever sends it (RocketMQ's
        SendMessageHook): this is how a front door sees messages other front doors send, without the core
        importing it. The hook returns the light queues (names starting with LIGHT_QUEUE_PREFIX, %LMQ%) the message
        must also be dispatched to, or None; the MQTT gateway names those of the subscriptions that match.

        The broker merges what every hook returns with the message's own `light_queues`, in order, and writes them
        where the store reads them; a queue named twice gets the message once, and a name without the prefix
        refuses the message with IllegalMessageError. A hook runs once the topic and queue are known to accept the
        message, reads the message without changing it, and may raise to refuse it: the sender gets that exception
        and nothing is stored."""
        self._send_hooks.append(hook)

    def add_stored_listener(self, listener: StoredListener) -> None:
        """Call `listener(message, result)` once for every message that `send` or `send_batch` appended to the store,
        synchronously, in store order, before that call returns, with the result the sender gets. Whatever its
        status, FLUSH_DISK_TIMEOUT included: the record is in the log, and a recovery would rebuild state from it.
        Never for a message that was refused (nothing appended). A front door whose in-memory state derives from
        messages (the MQTT gateway's retained messages) updates it here, so the state follows the store.

        Under SYNC_FLUSH a message is heard when its wait for the disk is over. A sender cancelled during that wait
        leaves its messages in the log: they are heard all the same, as FLUSH_DISK_TIMEOUT (not confirmed on disk),
        once every message stored before them has been heard. A listener that raises is logged; the send stands."""
        self._stored.add(listener)

    @property
    def sends_may_wait(self) -> bool:
        """Whether `send` and `send_batch` may suspend before they answer: only under SYNC_FLUSH, for the disk, and
        on a SYNC_MASTER, for a slave. Otherwise they answer (or raise) without awaiting anything, and a caller's
        timeout cannot expire."""
        return self._sync

    def _prepare(self, message: Message) -> Route:
        route = self._check_route(message.topic, message.queue_id)
        hooks = self._send_hooks
        if hooks or message.light_queues:
            name_light_queues(message, hooks)
        if PROPERTY_UNIQ_KEY not in message.properties:
            message.properties[PROPERTY_UNIQ_KEY] = self.ids.next_id()
        return route

    def _check_route(self, topic: str, queue_id: int) -> Route:
        route = self.route(topic)
        if not route.writable:
            raise NoPermissionError(f"topic {topic!r} is not writable (perm {route.config.perm!r})")
        if not 0 <= queue_id < len(route.write_queues):
            raise IllegalMessageError(
                f"topic {topic!r}: queue {queue_id} does not exist; the topic has"
                f" {len(route.write_queues)} write queues (0..{len(route.write_queues) - 1})"
            )
        return route

    async def send(self, message: Message) -> SendResult:
        """Store one message; under SYNC_FLUSH this returns once it is on disk (or its wait timed out).

        A message with a delay level, a timer or the transactional flag is parked in the broker's own topics
        (core.system_topics) and reaches its topic later (or never, for a transaction rolled back); its result
        names its real queue. Send hooks and stored listeners see it when it reaches its topic."""
        properties = message.properties
        if properties and not PARKING_PROPERTIES.isdisjoint(properties):
            return await self._send_parked(message)
        return await self._send_one(message)

    async def store_moved(self, message: Message) -> SendResult:
        """Store a message a broker service moves to its real topic (a delayed message that is due, a committed
        transaction): as `send`, without parking it again."""
        return await self._send_one(message)

    async def store_moved_batch(self, messages: Sequence[Message]) -> list[SendResult]:
        """`store_moved` for several messages of one topic and queue."""
        return await self._send_batch(messages)

    async def _send_parked(self, message: Message) -> SendResult:
        route = self._check_route(message.topic, message.queue_id)
        queue = route.write_queues[message.queue_id]
        if message.light_queues or PROPERTY_MULTI_DISPATCH in message.properties:
            raise IllegalMessageError(
                f"topic {message.topic!r}: a delayed or transactional message cannot name light queues"
            )
        parking = parking_for(message, self.transactions, self.schedule, self.timers)
        if parking is None:
            return await self._send_one(message)
        if PROPERTY_UNIQ_KEY not in message.properties:
            message.properties[PROPERTY_UNIQ_KEY] = self.ids.next_id()
        try:
            put = self._append(message)
        except StoreError as exc:
            self.traffic.refuse(refusal_reason(exc))
            raise from_store_error(exc) from exc
        # Counted as "in" when it reaches its topic (store_moved), not here in the broker's parking topic.
        parking.parked(message, put)
        unique_id = message.properties[PROPERTY_UNIQ_KEY]
        due_ms = parking.recall_due_ms(message)
        real_topic = message.properties[PROPERTY_REAL_TOPIC]
        handle = "" if due_ms is None else self.recalls.handle_for(real_topic, unique_id, due_ms)
        result = SendResult(
            SendStatus.SEND_OK, unique_id, queue, put.queue_offset, put.commit_log_offset, put.store_host, handle
        )
        if self._sync and waits((message,)):
            status = await self.store.wait_stored(put.end_offset)
            if status is not PutStatus.PUT_OK:
                result.status = SendStatus(status.value)
        return result

    async def _send_one(self, message: Message) -> SendResult:
        route = self._prepare(message)
        try:
            put = self._append(message)
        except StoreError as exc:
            self.traffic.refuse(refusal_reason(exc))
            raise from_store_error(exc) from exc
        self.traffic.stored(message.topic, 1, len(message.body))
        result = SendResult(
            SendStatus.SEND_OK,
            message.properties[PROPERTY_UNIQ_KEY],
            route.write_queues[put.queue_id],
            put.queue_offset,
            put.commit_log_offset,
            put.store_host,
        )
        if self._sync:
            if waits((message,)):
                await self._stored.confirm((message,), (result,), put.end_offset)
            else:
                self._stored.tell_unconfirmed((message,), (result,))
        elif self._stored_listeners:
            self._stored.tell(message, result)
        return result

    async def recall_message(self, topic: str, handle: str) -> str:
        """Recall a delay-level or timer message that is not due yet, by the recall handle its send answered
        (SendResult.recall_handle): it never reaches its topic. Returns its unique id once the recall is on disk (as
        a send under the store's flush mode). A second recall of it before it is due answers the same.

        Raises TopicNotFoundError for an unknown topic, RecallError (with its RecallProblem) for a handle that is
        malformed, of another topic or broker, or of a message due already (delivered, or being delivered), and
        ConfigFileError when the recall could not be recorded (then nothing was recalled)."""
        self.topic_config(topic)
        return await self.recalls.recall(topic, handle)

    async def send_batch(self, messages: Sequence[Message]) -> list[SendResult]:
        """Store several messages of one topic and queue together (RocketMQ's batch: no delay, no timer, no
        transaction, 4 MiB in all)."""
        refuse_parked(messages)
        return await self._send_batch(messages)

    async def _send_batch(self, messages: Sequence[Message]) -> list[SendResult]:
        # The per-message work is in the compiled core.batch_send: the MQTT gateway and the EventBridge buses send
        # every message through here.
        if not messages:
            return []
        total = batch_bytes(messages)
        first = messages[0]
        topic = first.topic
        queue_id = first.queue_id
        # One topic and queue: the route is checked once, before any hook sees a message of a refused batch.
        route = self._check_route(topic, queue_id)
        name_queues_and_ids(messages, self.ids.next_ids(len(messages)), self._send_hooks)
        try:
            puts = self.store.append_batch(messages)
        except StoreError as exc:
            self.traffic.refuse(refusal_reason(exc), len(messages))
            raise from_store_error(exc) from exc
        self.traffic.stored(topic, len(messages), total)
        results = send_results(messages, puts, route.write_queues[queue_id])
        if self._sync:
            if waits(messages):
                await self._stored.confirm(messages, results, puts[-1].end_offset)
            else:
                self._stored.tell_unconfirmed(messages, results)
        elif self._stored_listeners:
            self._stored.tell_all(messages, results)
        return results

    # --- pulling -----------------------------------------------------------------------------------------

    async def pull(
        self,
        group: str,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = DEFAULT_PULL_BATCH,
        message_filter: MessageFilter | None = None,
        long_poll_ms: int = 0,
    ) -> PullResult:
        """Read messages of a queue from `offset`; if there are none yet, wait up to `long_poll_ms` for one
        (core.queue_pull)."""
        return await pull_queue(self, self._long_poll, group, topic, queue_id, offset, max_count, message_filter,
                                long_poll_ms)  # fmt: skip

    async def wait_for_message(self, topic: str, queue_id: int, offset: int, timeout_s: float) -> bool:
        """Wait until the queue holds a message at or past `offset` (True) or the timeout passes (False)."""
        if self.has_past(topic, queue_id, offset):
            return True
        if self._long_poll is None or timeout_s <= 0:
            return False
        return await self._long_poll.wait(
            topic, queue_id, timeout_s, functools.partial(self.has_past, topic, queue_id, offset)
        )

    async def wait_visible(self, timeout_s: float = 10.0) -> bool:
        """Wait until every message stored so far is in its consume queue, where `pull` and the queues' offsets see
        it (the dispatcher thread puts it there a little after the append); False after `timeout_s`."""
        return await self.store.wait_visible(timeout=timeout_s)

    def has_past(self, topic: str, queue_id: int, offset: int) -> bool:
        """Whether the queue holds a message past `offset`."""
        return self.store.max_offset(topic, queue_id) > offset

    # --- offsets -----------------------------------------------------------------------------------------

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.offsets.commit_offset(group, topic, queue_id, offset)
        if self.ha.role is BrokerRole.SLAVE:
            self.master_copy.note_commit(group, topic, queue_id, offset)

    async def persist_offsets(self) -> None:
        """Write committed offsets to consumerOffset.json now (in a worker thread), rather than at the next round of
        `offset_persist_interval_s`: for an offset whose loss a crash must not cost, such as where a new reader
        starts."""
        await asyncio.to_thread(self.offsets.persist)

    def committed_offsets(self) -> list[tuple[str, str, int, int]]:
        """Every committed offset as (group, topic, queue id, offset), sorted: what a report of consumer lag reads."""
        return self.offsets.snapshot()

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset of a clustering group, or -1 if it has none."""
        return self.offsets.query_offset(group, topic, queue_id)

    def min_offset(self, topic: str, queue_id: int) -> int:
        return self.store.min_offset(topic, queue_id)

    def max_offset(self, topic: str, queue_id: int) -> int:
        return self.store.max_offset(topic, queue_id)

    def queue_entries(self, topic: str, queue_id: int, offset: int, max_count: int) -> list[tuple[int, int, int]]:
        """Where the messages of a queue are, from `offset`: (commit-log offset, size, tag code) per entry, size 0
        for a hole; none when `offset` is outside the queue. Reads no record and checks no permission: a front
        door that keeps recent messages decoded (the MQTT gateway) asks this first and `pull`s what it lacks."""
        return self.store.queue_entries(topic, queue_id, offset, max_count)

    def search_offset(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        return self.store.offset_by_time(topic, queue_id, timestamp_ms)

    def reset_offsets_to_time(self, group: str, topic: str, timestamp_ms: int) -> dict[int, int]:
        """Move a group's offsets on every queue of `topic` to the first message stored at or after the time."""
        offsets = {
            q: self.search_offset(topic, q, timestamp_ms) for q in range(self.topic_config(topic).read_queue_nums)
        }
        self.offsets.reset_offsets(group, topic, offsets)
        return offsets
