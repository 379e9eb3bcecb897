"""The broker's RocketMQ 4 clients, by connection (RocketMQ's ProducerManager and ConsumerManager for remoting):
HEART_BEAT 34, UNREGISTER_CLIENT 35, GET_CONSUMER_LIST_BY_GROUP 38, CHECK_CLIENT_CONFIG 46, and the
NOTIFY_CONSUMER_IDS_CHANGED 40 the broker sends a group's connections when its members change.

A consumer's heartbeat registers it in the core's consumer registry (`Broker.consumer_heartbeat`) with its
subscriptions, so that the admin API, offset resets and every other door see it; a clustering group gets its retry
topic, which its consumers subscribe to. A producer's heartbeat makes its connection a check-back target of its
group (transactions.py asks it). A connection that closes, or goes silent for CLIENT_EXPIRE_S, takes its clients
with it, and the groups they were in are told.
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from broker_remoting.heartbeat_data import read_heartbeat
from core import Broker, Subscription, build_filter, ensure_retry_topic
from remoting.channel import Channel
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingRequestError

log = logging.getLogger(__name__)

# RocketMQ's broker drops a client channel not heard for 120 s (ClientHousekeepingService, channelExpiredTimeout).
CLIENT_EXPIRE_S = 120.0

# Makes a producer connection a check-back target of a group; returns the call that undoes it.
CheckerMaker = Callable[[Channel, str], Callable[[], None]]


@dataclass(slots=True)
class _Connection:
    channel: Channel
    client_ids: set[str] = field(default_factory=set)
    consumers: set[tuple[str, str]] = field(default_factory=set)  # (group, client id)
    producers: dict[str, Callable[[], None]] = field(default_factory=dict)  # group -> unregister its checker
    heard: float = 0.0


class ClientTable:
    def __init__(self, broker: Broker, make_checker: CheckerMaker, clock: Callable[[], float] = time.monotonic):
        self._broker = broker
        self._make_checker = make_checker
        self._clock = clock
        self._connections: dict[Channel, _Connection] = {}
        # (group, topic) -> (expression type, expression): what pulls without a subscription of their own filter by.
        self._subscriptions: dict[tuple[str, str], tuple[str, str]] = {}

    def subscription_of(self, group: str, topic: str) -> tuple[str, str] | None:
        return self._subscriptions.get((group, topic))

    # --- requests ---

    async def heartbeat(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        heartbeat = read_heartbeat(request.body)
        connection = self._connections.get(channel)
        if connection is None:
            connection = self._connections[channel] = _Connection(channel)
        connection.heard = self._clock()
        connection.client_ids.add(heartbeat.client_id)
        for group in heartbeat.producer_groups:
            if group not in connection.producers:
                connection.producers[group] = self._make_checker(channel, group)
        for consumer in heartbeat.consumers:
            subscriptions = {}
            for item in consumer.subscriptions:
                subscriptions[item.topic] = Subscription(item.topic, item.expression_type, item.expression)
                self._subscriptions[(consumer.group, item.topic)] = (item.expression_type, item.expression)
            if consumer.message_model == "CLUSTERING":
                ensure_retry_topic(self._broker, consumer.group)
            connection.consumers.add((consumer.group, heartbeat.client_id))
            self._broker.consumer_heartbeat(
                consumer.group,
                heartbeat.client_id,
                consumer.message_model,
                subscriptions,
                on_change=functools.partial(_notify, channel),
            )
        return request.reply(ResponseCode.SUCCESS)

    async def unregister(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        client_id = ext.get("clientID", "")
        connection = self._connections.get(channel)
        if connection is not None:
            producer_group = ext.get("producerGroup")
            if producer_group and producer_group in connection.producers:
                connection.producers.pop(producer_group)()
            consumer_group = ext.get("consumerGroup")
            if consumer_group and (consumer_group, client_id) in connection.consumers:
                connection.consumers.discard((consumer_group, client_id))
                self._broker.leave_group(consumer_group, client_id)
        return request.reply(ResponseCode.SUCCESS)

    async def consumer_list(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = request.ext_fields.get("consumerGroup", "")
        ids = sorted({client_id for c in self._connections.values() for g, client_id in c.consumers if g == group})
        if not ids:
            return request.reply(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {group}")
        return request.reply(ResponseCode.SUCCESS, body=json.dumps({"consumerIdList": ids}).encode())

    async def check_client_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        """CHECK_CLIENT_CONFIG 46: a Java consumer with an SQL92 subscription asks whether the broker can filter so."""
        try:
            data = json.loads(request.body or b"{}")
            subscription = data.get("subscriptionData") or {}
            expression_type, expression = subscription.get("expressionType"), subscription.get("subString")
        except (ValueError, AttributeError) as exc:
            raise RemotingRequestError(f"CHECK_CLIENT_CONFIG body is not a CheckClientRequestBody: {exc}") from None
        build_filter(expression_type, expression)  # a FilterExpressionError is SUBSCRIPTION_PARSE_FAILED
        return request.reply(ResponseCode.SUCCESS)

    # --- connections ---

    def channel_closed(self, channel: Channel) -> None:
        connection = self._connections.pop(channel, None)
        if connection is not None:
            self._drop(connection)

    def expire(self) -> None:
        """Drop the connections not heard for CLIENT_EXPIRE_S (and close them)."""
        now = self._clock()
        for channel, connection in list(self._connections.items()):
            if now - connection.heard > CLIENT_EXPIRE_S:
                log.warning("remoting client %s not heard for %.0f s: dropped", channel.peer, CLIENT_EXPIRE_S)
                del self._connections[channel]
                self._drop(connection)
                channel.close()

    def _drop(self, connection: _Connection) -> None:
        for unregister in connection.producers.values():
            unregister()
        connection.producers.clear()
        for group, client_id in connection.consumers:
            self._broker.leave_group(group, client_id)
        connection.consumers.clear()


def _notify(channel: Channel, group: str) -> None:
    """NOTIFY_CONSUMER_IDS_CHANGED to one member's connection: it rebalances now."""
    channel.invoke_oneway(RemotingCommand(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, ext_fields={"consumerGroup": group}))
