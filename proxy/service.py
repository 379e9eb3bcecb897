"""apache.rocketmq.v2.MessagingService on the broker core: each RPC of the RocketMQ 5 protocol, as the official
clients call it, mapped onto the public core API (Broker, PopService, the transaction service).

Every answer carries a Status (proxy.status_codes): a refusal is an answer with the protocol's code and a
message saying what was wrong, never a gRPC error or a traceback, and one client's bad request touches nobody
else's. RPCs the endpoint does not serve answer NOT_IMPLEMENTED.

What each RPC does, and where it departs from RocketMQ's proxy, is in docs/grpc.md. Here: routes, heartbeats,
the Telemetry stream (proxy.telemetry), sending (messages mapped by proxy.message_codec), ending transactions and
recalling timer messages; the consumers' RPCs are proxy.consumer_rpcs, those of offsets proxy.offset_rpcs.
Access control, when configured, is checked first on every RPC (acl.access_control).
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from acl.access_control import AccessControl, Action, ResourceKind
from core import Broker, IllegalArgumentError, LocalTransactionState, SendResult, SendStatus, TopicConfig
from proxy.cluster_view import ClusterView
from proxy.consumer_rpcs import ConsumerRpcs
from proxy.message_codec import message_type_of, to_core
from proxy.offset_rpcs import OffsetRpcs
from proxy.routes import accepts, assignments, broker_of, endpoints_of, interleaved, message_queues, readable
from proxy.rpc_support import ServiceState, combined, peer_host, refusal, resource_name, unary
from proxy.status_codes import RequestError, ok, status
from proxy.stubs import (
    Code,
    MessageType,
    MessagingServiceServicer,
    TransactionResolution,
    TransactionSource,
    definition_pb2,
)
from proxy.stubs import service_pb2 as pb
from proxy.telemetry import Telemetry

# The RPCs served by the endpoint's parts, under the names gRPC looks them up by on the servicer.
CONSUMER_RPCS = ("ReceiveMessage", "AckMessage", "ChangeInvisibleDuration", "ForwardMessageToDeadLetterQueue")
OFFSET_RPCS = ("QueryOffset", "GetOffset", "UpdateOffset", "PullMessage")


class MessagingService(MessagingServiceServicer):
    """The servicer: routes, heartbeats, Telemetry and sending are its own methods; the consumers' RPCs are
    `consumers`' (proxy.consumer_rpcs) and those of offsets `offsets`' (proxy.offset_rpcs), served under their
    names. The parts share one ServiceState."""

    def __init__(self, broker: Broker, *, max_body_bytes: int, access: AccessControl | None = None) -> None:
        self.state = ServiceState(broker, max_body_bytes=max_body_bytes, access=access)
        self.broker = broker
        # The consumers' part releases what a departed client held; it exists once the telemetry does.
        self.telemetry = Telemetry(
            broker,
            max_body_bytes=max_body_bytes,
            release=lambda client, held: self.consumers.release_held(client, held),
        )
        self.sessions = self.telemetry.sessions
        self.consumers = ConsumerRpcs(self.state, self.telemetry)
        self.offsets = OffsetRpcs(self.state)
        for part, names in ((self.consumers, CONSUMER_RPCS), (self.offsets, OFFSET_RPCS)):
            for name in names:
                setattr(self, name, getattr(part, name))
        self._turns: dict[str, int] = {}
        self._renewer: asyncio.Task[None] | None = None
        # Set when the broker is one group of a cluster: routes then name every group (proxy.cluster_view).
        self.cluster_view: ClusterView | None = None

    @property
    def own_endpoints(self) -> definition_pb2.Endpoints:
        """Where clients reach this endpoint when a request does not say (set by proxy.server once it listens)."""
        return self.state.own_endpoints

    @own_endpoints.setter
    def own_endpoints(self, endpoints: definition_pb2.Endpoints) -> None:
        self.state.own_endpoints = endpoints

    def start(self) -> None:
        self.telemetry.start()
        self._renewer = asyncio.get_running_loop().create_task(self.consumers.renew_held())

    async def close(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            await asyncio.gather(self._renewer, return_exceptions=True)
        await self.telemetry.close()

    # --- routes and heartbeats ----------------------------------------------------------------------------------

    async def _groups(
        self, topic: str, given: definition_pb2.Endpoints
    ) -> list[tuple[TopicConfig, definition_pb2.Broker]]:
        """The topic's broker groups, each with its queues' config and where clients reach it: this endpoint's own
        (at the address the client used), and on a cluster every other group serving it (proxy.cluster_view)."""
        own_name = self.broker.config.broker_name
        groups = await self.cluster_view.groups(topic) if self.cluster_view is not None else None
        if groups is None:
            return [(self.broker.route(topic).config, broker_of(own_name, self.state.endpoints(given)))]
        answer = []
        for group in groups:
            if group.endpoint is None:
                own = self.broker.route(topic).config if self.broker.has_topic(topic) else group.config
                answer.append((own, broker_of(own_name, self.state.endpoints(given))))
            else:
                answer.append((group.config, broker_of(group.broker_name, endpoints_of(*group.endpoint))))
        return answer

    @unary(pb.QueryRouteResponse)
    async def QueryRoute(self, request: pb.QueryRouteRequest, context: grpc.aio.ServicerContext) -> Any:
        topic = resource_name(request.topic, "topic")
        self.state.check(context, (ResourceKind.TOPIC, topic, Action.ANY))
        groups = await self._groups(topic, request.endpoints)
        queues = interleaved([message_queues(config, broker) for config, broker in groups])
        return pb.QueryRouteResponse(status=ok(), message_queues=queues)

    @unary(pb.QueryAssignmentResponse)
    async def QueryAssignment(self, request: pb.QueryAssignmentRequest, context: grpc.aio.ServicerContext) -> Any:
        topic, group = resource_name(request.topic, "topic"), resource_name(request.group, "consumer group")
        self.state.check(context, (ResourceKind.TOPIC, topic, Action.SUB), (ResourceKind.GROUP, group, Action.SUB))
        orderly = self.broker.groups.get_or_auto_create(group).consume_message_orderly
        groups = await self._groups(topic, request.endpoints)
        served = [(config, broker) for config, broker in groups if readable(config)] or groups[:1]
        found = [a for config, broker in served for a in assignments(config, broker, orderly)]
        return pb.QueryAssignmentResponse(status=ok(), assignments=found)

    @unary(pb.HeartbeatResponse)
    async def Heartbeat(self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext) -> Any:
        client_id = self.telemetry.client_id(context)
        if request.HasField("group"):
            group = resource_name(request.group, "consumer group")
            self.state.check(context, (ResourceKind.GROUP, group, Action.SUB))
            self.broker.groups.get_or_auto_create(group)
        else:
            self.state.check(context)
        self.sessions.touch(client_id)
        return pb.HeartbeatResponse(status=ok())

    @unary(pb.NotifyClientTerminationResponse)
    async def NotifyClientTermination(
        self, request: pb.NotifyClientTerminationRequest, context: grpc.aio.ServicerContext
    ) -> Any:
        self.state.check(context)
        client_id = self.telemetry.client_id(context)
        await self.telemetry.end_session(client_id)
        return pb.NotifyClientTerminationResponse(status=ok())

    async def Telemetry(
        self, request_iterator: AsyncIterator[pb.TelemetryCommand], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.TelemetryCommand]:
        try:
            self.state.check(context)
            client_id = self.telemetry.client_id(context)
        except Exception as exc:
            yield pb.TelemetryCommand(status=refusal("Telemetry", exc))
            return
        async for command in self.telemetry.serve(client_id, request_iterator, self._check_settings(context)):
            yield command

    def _check_settings(self, context: grpc.aio.ServicerContext) -> Callable[[definition_pb2.Settings], None]:
        def check(settings: definition_pb2.Settings) -> None:
            needs: list[tuple[ResourceKind, str, Action]] = []
            if settings.HasField("subscription"):
                group = resource_name(settings.subscription.group, "consumer group")
                needs.append((ResourceKind.GROUP, group, Action.SUB))
                for entry in settings.subscription.subscriptions:
                    needs.append((ResourceKind.TOPIC, resource_name(entry.topic, "topic"), Action.SUB))
            elif settings.HasField("publishing"):
                needs += [
                    (ResourceKind.TOPIC, resource_name(t, "topic"), Action.PUB) for t in settings.publishing.topics
                ]
            self.state.check(context, *needs)

        return check

    # --- sending ------------------------------------------------------------------------------------------------

    @unary(pb.SendMessageResponse)
    async def SendMessage(self, request: pb.SendMessageRequest, context: grpc.aio.ServicerContext) -> Any:
        if not request.messages:
            raise RequestError(Code.MESSAGE_CORRUPTED, "no message to send")
        sent = request.messages
        first = sent[0].topic
        topic = resource_name(first, "topic")
        if len(sent) > 1 and any(m.topic != first for m in sent):
            raise RequestError(Code.MESSAGE_CORRUPTED, "topic in message is not same: a batch holds one topic")
        if self.state.access is not None:
            self.state.check(context, (ResourceKind.TOPIC, topic, Action.PUB))
        for m in sent:
            if m.system_properties.lite_topic or m.system_properties.HasField("priority"):
                raise RequestError(
                    Code.NOT_IMPLEMENTED, "lite topics and priority messages are not implemented by mqgate yet"
                )
        now_ms = time.time_ns() // 1_000_000
        max_delay_ms = self.broker.config.timer_max_delay_s * 1000

        def peer() -> str:
            return peer_host(context)

        messages = [
            to_core(
                m, peer_host=peer, max_body_bytes=self.state.max_body_bytes, max_delay_ms=max_delay_ms, now_ms=now_ms
            )
            for m in sent
        ]
        route = self.broker.route(topic)
        for message in messages:
            kind = message_type_of(message.properties)
            if not accepts(route.config, kind):
                raise RequestError(
                    Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                    f"topic {topic!r} takes {route.config.message_type.value} messages, this one is"
                    f" {definition_pb2.MessageType.Name(kind)}; send it to a topic of that type (topics.json"
                    ' "attributes": {"message.type": ...}) or make the topic MIXED',
                )
        queues = len(route.write_queues)
        if not queues:
            raise RequestError(Code.FORBIDDEN, f"topic {topic!r} has no writable queue")
        group = messages[0].properties.get("__SHARDINGKEY") if len(messages) == 1 else None
        if group:
            queue_id = zlib.crc32(group.encode()) % queues
        else:
            turn = self._turns.get(topic, 0)
            self._turns[topic] = turn + 1
            queue_id = turn % queues
        for message in messages:
            message.queue_id = queue_id
        if len(messages) == 1:
            results = [await self.broker.send(messages[0])]
        else:
            results = await self.broker.send_batch(messages)
        entries = [_send_entry(result, request.messages[i]) for i, result in enumerate(results)]
        return pb.SendMessageResponse(status=combined([e.status.code for e in entries]), entries=entries)

    @unary(pb.EndTransactionResponse)
    async def EndTransaction(self, request: pb.EndTransactionRequest, context: grpc.aio.ServicerContext) -> Any:
        topic = resource_name(request.topic, "topic")
        self.state.check(context, (ResourceKind.TOPIC, topic, Action.PUB))
        if request.resolution == TransactionResolution.COMMIT:
            state = LocalTransactionState.COMMIT_MESSAGE
        elif request.resolution == TransactionResolution.ROLLBACK:
            state = LocalTransactionState.ROLLBACK_MESSAGE
        else:
            raise RequestError(Code.BAD_REQUEST, "resolution must be COMMIT or ROLLBACK")
        if not request.transaction_id:
            raise RequestError(Code.INVALID_TRANSACTION_ID, "the request has no transaction_id")
        try:
            await self.broker.transactions.end(
                topic,
                request.transaction_id,
                state,
                transaction_id=request.message_id or None,
                from_check=request.source == TransactionSource.SOURCE_SERVER_CHECK,
            )
        except IllegalArgumentError as exc:
            raise RequestError(Code.INVALID_TRANSACTION_ID, str(exc)) from exc
        return pb.EndTransactionResponse(status=ok())

    @unary(pb.RecallMessageResponse)
    async def RecallMessage(self, request: pb.RecallMessageRequest, context: grpc.aio.ServicerContext) -> Any:
        """RocketMQ 5.3's recall of a timer (or delay-level) message not yet due, by the `recall_handle` its send
        answered: it never reaches its consumers. As the proxy: the topic must take DELAY messages, and a handle the
        broker refuses (malformed, another topic's, due already) is INTERNAL_SERVER_ERROR (proxy.status_codes)."""
        topic = resource_name(request.topic, "topic")
        self.state.check(context, (ResourceKind.TOPIC, topic, Action.PUB))
        config = self.broker.topic_config(topic)
        if not accepts(config, MessageType.DELAY):
            raise RequestError(
                Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                f"topic {topic!r} takes {config.message_type.value} messages: only a DELAY or MIXED topic holds"
                " messages to recall",
            )
        message_id = await self.broker.recall_message(topic, request.recall_handle)
        return pb.RecallMessageResponse(status=ok(), message_id=message_id)

    @unary(pb.SyncLiteSubscriptionResponse)
    async def SyncLiteSubscription(
        self, request: pb.SyncLiteSubscriptionRequest, context: grpc.aio.ServicerContext
    ) -> Any:
        raise RequestError(Code.NOT_IMPLEMENTED, "lite topics are not implemented by mqgate yet")


# Stored, not confirmed as promised (RocketMQ's proxy maps them so): on disk under SYNC_FLUSH, on a slave under a
# SYNC_MASTER.
_NOT_CONFIRMED = {
    SendStatus.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    SendStatus.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    SendStatus.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
}


def _send_entry(result: SendResult, message: definition_pb2.Message) -> pb.SendResultEntry:
    if result.status is SendStatus.SEND_OK:
        is_transaction = message.system_properties.message_type == definition_pb2.MessageType.TRANSACTION
        return pb.SendResultEntry(
            status=ok(),
            message_id=result.msg_id,
            transaction_id=result.offset_msg_id if is_transaction else "",
            offset=result.queue_offset,
            recall_handle=result.recall_handle,
        )
    code = _NOT_CONFIRMED.get(result.status, Code.INTERNAL_ERROR)
    return pb.SendResultEntry(
        status=status(code, f"send message failed, sendStatus={result.status.value}"), message_id=result.msg_id
    )
