"""One process's connection to a cluster (RocketMQ's MQClientInstance): the NameServers, the routes of the topics in
use, a connection per broker, the heartbeats that make its producers and consumers known to every broker, and the
requests brokers send it (a changed group, a transaction's check-back).

- Routes: fetched on first use, again every `route_refresh_s` (RocketMQ's pollNameServerInterval, 30 s) for every
  topic in use, and at once after a send or pull to a broker fails (`forget_route`). A topic the NameServers do not
  know raises TopicNotFoundError; `route_or_template` gives a producer the auto-create template's queues instead
  (TBW102), as RocketMQ's producer does for a topic not yet created.
- Heartbeats: every `heartbeat_s` (RocketMQ's heartbeatBrokerInterval, 30 s) and at once when a producer or
  consumer starts, to the master of every broker group of the routes in use: HEART_BEAT with the producer groups
  and the consumers' groups, models and subscriptions. At close, UNREGISTER_CLIENT to each.
- Requests from brokers: NOTIFY_CONSUMER_IDS_CHANGED wakes the group's rebalance; CHECK_TRANSACTION_STATE goes to
  the checker of the half message's producer group (`transaction_checkers`, filled by TransactionProducer). Any
  other is answered REQUEST_CODE_NOT_SUPPORTED.

A call to a broker raises the core's error for a refusal (replies.py), ServiceNotAvailableError for a broker that
cannot be reached, RequestTimeoutError for one that does not answer in time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from core import MessageQueue, ServiceNotAvailableError, StoredMessage, TopicNotFoundError
from remote_client.namesrv_client import NameServers, parse_namesrv_addr
from remote_client.records import stored_messages
from remote_client.replies import check, timed_out, unreachable
from remote_client.topic_route import MASTER_ID, BrokerData, TopicRoute
from remoting.channel import Channel, ChannelClosedError, RemotingTimeoutError
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingError

log = logging.getLogger(__name__)

# RocketMQ's client defaults (ClientConfig): pollNameServerInterval, heartbeatBrokerInterval; 3 s per request.
ROUTE_REFRESH_S = 30.0
HEARTBEAT_S = 30.0
REQUEST_TIMEOUT_S = 3.0
# The topic a broker that creates topics on first send registers as the template (TopicValidator.AUTO_CREATE_TOPIC_
# KEY_TOPIC), and how many queues a producer asks for on first send (DefaultMQProducer.defaultTopicQueueNums).
AUTO_CREATE_TEMPLATE = "TBW102"
DEFAULT_TOPIC_QUEUE_NUMS = 4
# Where a half message names its producer group (MessageConst.PROPERTY_PRODUCER_GROUP).
PROPERTY_PRODUCER_GROUP = "PGROUP"

BrokerRequestHandler = Callable[[Channel, RemotingCommand], Awaitable[RemotingCommand | None]]
# A transactional producer's answer to a check-back: (the broker's connection, the request, the half message).
CheckBack = Callable[[Channel, RemotingCommand, StoredMessage], None]


def local_ip() -> str:
    """This machine's first non-loopback IPv4 address, as RocketMQ's clients name themselves (127.0.0.1 if none)."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing interface
        address: str = probe.getsockname()[0]
        return address
    return "127.0.0.1"


@dataclass(slots=True)
class ConsumerEntry:
    """A consumer of this process as its heartbeat describes it (RocketMQ's ConsumerData)."""

    group: str
    consume_type: str  # CONSUME_ACTIVELY (pull), CONSUME_PASSIVELY (push) or CONSUME_POP
    message_model: str  # CLUSTERING or BROADCASTING
    consume_from_where: str
    subscriptions: dict[str, tuple[str, str]] = field(default_factory=dict)  # topic -> (type, expression)
    on_ids_changed: Callable[[], None] | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "groupName": self.group,
            "consumeType": self.consume_type,
            "messageModel": self.message_model,
            "consumeFromWhere": self.consume_from_where,
            "subscriptionDataSet": [
                {
                    "topic": topic,
                    "subString": expression,
                    "expressionType": kind,
                    "tagsSet": [],
                    "codeSet": [],
                    "subVersion": 0,
                    "classFilterMode": False,
                }
                for topic, (kind, expression) in sorted(self.subscriptions.items())
            ],
            "unitMode": False,
        }


class Cluster:
    def __init__(
        self,
        namesrv_addr: str | Sequence[str],
        *,
        instance_name: str | None = None,
        request_timeout_s: float = REQUEST_TIMEOUT_S,
        route_refresh_s: float = ROUTE_REFRESH_S,
        heartbeat_s: float = HEARTBEAT_S,
    ) -> None:
        self.client_id = f"{local_ip()}@{instance_name or os.getpid()}"
        self.request_timeout_s = request_timeout_s
        self._route_refresh_s = route_refresh_s
        self.heartbeat_s = heartbeat_s
        self.remoting = RemotingClient(self._on_request)
        self.namesrvs = NameServers(parse_namesrv_addr(namesrv_addr), self.remoting)
        self._routes: dict[str, TopicRoute] = {}
        self._fetching: dict[str, asyncio.Future[TopicRoute | None]] = {}
        self._masters: dict[str, str] = {}  # broker name -> master address, from every route seen
        # Broker name -> its addresses by broker id, as the latest route names them; and the broker id each queue's
        # broker last suggested its reader pull from (RocketMQ's pullFromWhichNodeTable).
        self._brokers: dict[str, BrokerData] = {}
        self._suggested: dict[MessageQueue, int] = {}
        self.producer_groups: dict[str, int] = {}  # group -> producers of this process in it
        self.consumers: dict[str, ConsumerEntry] = {}
        self._broker_handlers: dict[int, BrokerRequestHandler] = {}
        self.transaction_checkers: dict[str, CheckBack] = {}  # producer group -> its check-back
        self._tasks: list[asyncio.Task[None]] = []
        self._pending_heartbeat: asyncio.Task[None] | None = None
        self._started = False

    # --- life ---

    async def start(self) -> None:
        if self._started:
            return
        self._started = True
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._refresh_routes_loop()), loop.create_task(self._heartbeat_loop())]

    async def close(self) -> None:
        if self._pending_heartbeat is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self._pending_heartbeat
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        await asyncio.gather(*(self._unregister(address) for address in {a for _, a in self._heartbeat_targets()}))
        await self.remoting.close()
        self._started = False

    async def __aenter__(self) -> Cluster:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- routes ---

    async def route(self, topic: str, refresh: bool = False) -> TopicRoute:
        """The topic's route; TopicNotFoundError if no broker serves it."""
        route = await self._route(topic, refresh)
        if route is None:
            raise TopicNotFoundError(f"topic {topic!r} does not exist: no broker of the cluster serves it")
        return route

    async def route_or_template(self, topic: str) -> TopicRoute:
        """The topic's route; for a topic not created yet, the auto-create template's groups with the queues a
        first send asks for (RocketMQ's producer on TBW102), so that the broker it reaches creates the topic."""
        route = await self._route(topic, False)
        if route is not None:
            return route
        template = await self._route(AUTO_CREATE_TEMPLATE, False)
        if template is None:
            raise TopicNotFoundError(
                f"topic {topic!r} does not exist, and no broker of the cluster creates topics on first send"
                f" (none registers {AUTO_CREATE_TEMPLATE}): create it with `mqgate admin topic create`"
            )
        return template.renamed(topic, DEFAULT_TOPIC_QUEUE_NUMS)

    async def _route(self, topic: str, refresh: bool) -> TopicRoute | None:
        if not refresh:
            known = self._routes.get(topic)
            if known is not None:
                return known
        fetching = self._fetching.get(topic)
        if fetching is not None:
            return await asyncio.shield(fetching)
        future: asyncio.Future[TopicRoute | None] = asyncio.get_running_loop().create_future()
        self._fetching[topic] = future
        try:
            route = await self.namesrvs.route(topic)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()
            raise
        finally:
            del self._fetching[topic]
        if route is None:
            self._routes.pop(topic, None)
        else:
            self._learn(topic, route)
        future.set_result(route)
        return route

    def _learn(self, topic: str, route: TopicRoute) -> bool:
        """Keep a route; whether the topic's queues changed."""
        old = self._routes.get(topic)
        self._routes[topic] = route
        new_master = False
        for name, broker in route.brokers.items():
            if self.consumers and broker.addresses.keys() - (self._brokers.get(name) or broker).addresses.keys():
                new_master = True  # a slave its consumers may read from: tell it of them too
            self._brokers[name] = broker
            if broker.master is None:
                self._masters.pop(name, None)  # gone: its slaves serve reads, nobody takes sends
            elif self._masters.get(name) != broker.master:
                self._masters[name] = broker.master
                new_master = True
        if new_master and (self.producer_groups or self.consumers):
            self._heartbeat_soon()  # a group's master it has not told of its producers and consumers yet
        return old is None or old.queue_datas != route.queue_datas or old.brokers != route.brokers

    def forget_route(self, topic: str) -> None:
        """Fetch the route again on next use (a broker of it failed)."""
        self._routes.pop(topic, None)

    def cached_route(self, topic: str) -> TopicRoute | None:
        return self._routes.get(topic)

    async def _refresh_routes_loop(self) -> None:
        while True:
            await asyncio.sleep(self._route_refresh_s)
            await self.refresh_routes()

    async def refresh_routes(self) -> None:
        """Fetch every route in use again; a consumer whose topic's queues changed rebalances."""
        topics = set(self._routes) | {t for consumer in self.consumers.values() for t in consumer.subscriptions}
        changed = set()
        for topic in sorted(topics):
            try:
                route = await self.namesrvs.route(topic)
            except Exception as exc:  # a NameServer outage must not end the loop: the routes in hand stay
                log.warning("refreshing the route of topic %r failed: %s", topic, exc)
                continue
            if route is None:
                if self._routes.pop(topic, None) is not None:
                    changed.add(topic)
            elif self._learn(topic, route):
                changed.add(topic)
        for consumer in self.consumers.values():
            if consumer.on_ids_changed is not None and changed & consumer.subscriptions.keys():
                consumer.on_ids_changed()

    def master_address(self, broker_name: str) -> str:
        address = self._masters.get(broker_name)
        if address is None:
            raise ServiceNotAvailableError(f"broker group {broker_name!r} has no master in the routes known")
        return address

    def read_address(self, queue: MessageQueue) -> str:
        """Where to pull `queue` from (RocketMQ's findBrokerAddressInSubscribe): the broker its group last suggested
        (suggestWhichBrokerId), else the master, else a slave (the master is down: consumers go on from a copy)."""
        return self._reader(queue.broker_name, self._suggested.get(queue, MASTER_ID))

    def _reader(self, broker_name: str, wanted: int) -> str:
        broker = self._brokers.get(broker_name)
        if broker is None or not broker.addresses:
            return self.master_address(broker_name)
        addresses = broker.addresses
        return addresses.get(wanted) or addresses.get(MASTER_ID) or addresses[min(addresses)]

    async def invoke_read(
        self, queue: MessageQueue, request: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """A pull of `queue`, at `read_address`; the broker's suggestion for the next one is kept."""
        reply = await self.invoke_address(self.read_address(queue), request, timeout_s, queue.broker_name)
        suggested = reply.ext_fields.get("suggestWhichBrokerId", "")
        if suggested.isdigit():
            self._suggested[queue] = int(suggested)
        return reply

    async def invoke_offsets(
        self, broker_name: str, request: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """An offset's query or commit: at the group's master, else at a slave (which gives it back to the master
        when it returns)."""
        return await self.invoke_address(self._reader(broker_name, MASTER_ID), request, timeout_s, broker_name)

    def broker_names(self) -> list[str]:
        return sorted(self._masters)

    # --- requests to brokers ---

    async def invoke(
        self, broker_name: str, request: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """Send to the group's master; the reply whatever its code (check it with replies.check)."""
        return await self.invoke_address(self.master_address(broker_name), request, timeout_s, broker_name)

    async def invoke_address(
        self, address: str, request: RemotingCommand, timeout_s: float | None = None, name: str | None = None
    ) -> RemotingCommand:
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        where = f"broker {name} ({address})" if name else f"broker {address}"
        try:
            return await self.remoting.invoke(address, request, timeout)
        except RemotingTimeoutError:
            raise timed_out(where, timeout) from None
        except (ChannelClosedError, RemotingError, OSError) as exc:
            raise unreachable(where, exc) from None

    async def call(self, broker_name: str, request: RemotingCommand, timeout_s: float | None = None) -> RemotingCommand:
        """`invoke`, raising the core's error for a refusal."""
        reply = await self.invoke(broker_name, request, timeout_s)
        return check(reply, f"broker {broker_name}")

    async def call_any(
        self, broker_name: str, request: RemotingCommand, timeout_s: float | None = None
    ) -> RemotingCommand:
        """A read-only request (a queue's offsets, a group's members) to the group's master, else a slave; raising
        the core's error for a refusal."""
        reply = await self.invoke_offsets(broker_name, request, timeout_s)
        return check(reply, f"broker {broker_name}")

    async def oneway(self, broker_name: str, request: RemotingCommand) -> None:
        address = self.master_address(broker_name)
        try:
            await self.remoting.invoke_oneway(address, request)
        except (ChannelClosedError, RemotingError, OSError) as exc:
            raise unreachable(f"broker {broker_name} ({address})", exc) from None

    # --- producers and consumers of this process ---

    def add_producer(self, group: str) -> None:
        self.producer_groups[group] = self.producer_groups.get(group, 0) + 1

    def remove_producer(self, group: str) -> None:
        left = self.producer_groups.get(group, 0) - 1
        if left > 0:
            self.producer_groups[group] = left
        else:
            self.producer_groups.pop(group, None)

    def add_consumer(self, entry: ConsumerEntry) -> None:
        if entry.group in self.consumers:
            raise ValueError(f"group {entry.group!r} already has a consumer in this Cluster (RocketMQ: one per group)")
        self.consumers[entry.group] = entry

    def remove_consumer(self, group: str) -> None:
        self.consumers.pop(group, None)

    def on_broker_request(self, code: int, handler: BrokerRequestHandler) -> None:
        self._broker_handlers[code] = handler

    async def _on_request(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        if request.code == RequestCode.NOTIFY_CONSUMER_IDS_CHANGED:
            consumer = self.consumers.get(request.ext_fields.get("consumerGroup", ""))
            if consumer is not None and consumer.on_ids_changed is not None:
                consumer.on_ids_changed()
            return None
        if request.code == RequestCode.CHECK_TRANSACTION_STATE:
            self._check_back(channel, request)
            return None
        handler = self._broker_handlers.get(request.code)
        if handler is not None:
            return await handler(channel, request)
        return request.reply(
            ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"request code {request.code} is not supported by this client"
        )

    def _check_back(self, channel: Channel, request: RemotingCommand) -> None:
        """A broker asks about an undecided half message: to the producer of its group (PGROUP), if there is one."""
        try:
            messages = stored_messages(request.body)
        except RemotingError as exc:
            log.warning("a check-back from %s carries no half message that reads: %s", channel.peer, exc)
            return
        group = messages[0].properties.get(PROPERTY_PRODUCER_GROUP, "") if messages else ""
        checker = self.transaction_checkers.get(group)
        if checker is None:
            log.info("a check-back from %s for producer group %r, which has no producer here", channel.peer, group)
            return
        checker(channel, request, messages[0])

    # --- heartbeats ---

    def heartbeat_body(self) -> bytes:
        data = {
            "clientID": self.client_id,
            "producerDataSet": [{"groupName": group} for group in sorted(self.producer_groups)],
            "consumerDataSet": [entry.to_json() for _, entry in sorted(self.consumers.items())],
        }
        return json.dumps(data, separators=(",", ":")).encode()

    async def heartbeat(self) -> None:
        """HEART_BEAT to every master known (RocketMQ's sendHeartbeatToAllBrokerWithLock); a broker that cannot be
        reached is logged and skipped."""
        if not self.producer_groups and not self.consumers:
            return
        for topic in {t for consumer in self.consumers.values() for t in consumer.subscriptions} - set(self._routes):
            with contextlib.suppress(Exception):
                await self._route(topic, False)
        body = self.heartbeat_body()
        targets = self._heartbeat_targets()
        results = await asyncio.gather(
            *(
                self.invoke_address(address, RemotingCommand(RequestCode.HEART_BEAT, body=body), name=name)
                for name, address in targets
            ),
            return_exceptions=True,
        )
        for (name, address), result in zip(targets, results, strict=True):
            if isinstance(result, BaseException):
                log.info("heartbeat to broker %s (%s) failed: %s", name, address, result)

    def _heartbeat_targets(self) -> list[tuple[str, str]]:
        """Every master; with consumers, every slave too (they read from slaves: RocketMQ's sendHeartbeatToAllBroker
        skips slaves only for producers alone)."""
        targets = set(self._masters.items())
        if self.consumers:
            targets |= {
                (name, address) for name, broker in self._brokers.items() for address in broker.addresses.values()
            }
        return sorted(targets)

    def _heartbeat_soon(self) -> None:
        if self._pending_heartbeat is None or self._pending_heartbeat.done():
            with contextlib.suppress(RuntimeError):  # no running loop: the periodic heartbeat will do
                self._pending_heartbeat = asyncio.get_running_loop().create_task(self.heartbeat())

    async def _heartbeat_loop(self) -> None:
        while True:
            await asyncio.sleep(self.heartbeat_s)
            with contextlib.suppress(Exception):
                await self.heartbeat()

    async def _unregister(self, address: str) -> None:
        groups = [("producerGroup", group) for group in self.producer_groups]
        groups += [("consumerGroup", group) for group in self.consumers]
        for key, group in groups:
            await self._unregister_one(address, key, group)

    async def _unregister_one(self, address: str, key: str, group: str) -> None:
        request = RemotingCommand(RequestCode.UNREGISTER_CLIENT, ext_fields={"clientID": self.client_id, key: group})
        with contextlib.suppress(Exception):
            await self.remoting.invoke(address, request, 1.0)

    async def unregister_group(self, key: str, group: str) -> None:
        """Tell every master this client no longer has a producer ("producerGroup") or consumer ("consumerGroup")
        of `group` (UNREGISTER_CLIENT), so that its group's members change at once rather than at expiry."""
        addresses = {address for _, address in self._heartbeat_targets()}
        await asyncio.gather(*(self._unregister_one(address, key, group) for address in addresses))


def now_ms() -> float:
    return time.monotonic() * 1000
