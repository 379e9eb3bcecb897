"""apache.rocketmq.v2.MessagingService on the broker core: each RPC of the RocketMQ 5 protocol, as the official
clients call it, mapped onto the public core API (Broker, PopService, the transaction service).

Every answer carries a Status (core.grpc.status_codes): a refusal is an answer with the protocol's code and a
message saying what was wrong, never a gRPC error or a traceback, and one client's bad request touches nobody
else's. RPCs the endpoint does not serve answer NOT_IMPLEMENTED.

What each RPC does, and where it departs from RocketMQ's proxy, is in the README (RocketMQ 5 gRPC endpoint); the
mapping of messages is core.grpc.message_codec, of routes core.grpc.routes, the Telemetry stream
core.grpc.telemetry. Access control, when configured, is checked first on every RPC (core.grpc.access_check).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc

from core import (
    MAX_INVISIBLE_MS,
    Broker,
    CoreError,
    ExpressionType,
    IllegalArgumentError,
    LocalTransactionState,
    MessageFilter,
    PopService,
    PullStatus,
    SendResult,
    SendStatus,
    build_filter,
)
from core.grpc.access_control import AccessControl, Action, ResourceKind
from core.grpc.held_messages import CLEAR_INVISIBLE_MS, RENEW_SLICE_MS
from core.grpc.message_codec import duration_ms, message_type_of, to_core, to_proto, to_timestamp
from core.grpc.routes import accepts, assignments, broker_of, message_queues
from core.grpc.status_codes import RequestError, ok, status, status_of
from core.grpc.stubs import (
    Code,
    FilterType,
    MessagingServiceServicer,
    TransactionResolution,
    TransactionSource,
    definition_pb2,
)
from core.grpc.stubs import service_pb2 as pb
from core.grpc.telemetry import Telemetry

log = logging.getLogger(__name__)

# The proxy's grpcClientConsumerMinLongPollingTimeoutMillis / MaxLongPollingTimeoutMillis, minInvisibleTimeMillsForRecv.
MIN_LONG_POLLING_MS = 5_000
MAX_LONG_POLLING_MS = 20_000
MIN_RECEIVE_INVISIBLE_MS = 10_000
# Left of a receive's deadline for the answer to travel back.
DEADLINE_MARGIN_MS = 200
# Subscriptions compiled, kept by (type, expression): a consumer sends the same one with every receive.
MAX_CACHED_FILTERS = 4096

Response = TypeVar("Response")


def unary(response_type: type[Any]) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]]:
    """Answer whatever an RPC raises with a `response_type` carrying the refusal's Status."""

    def wrap(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(method)
        async def handler(self: MessagingService, request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                return await method(self, request, context)
            except Exception as exc:  # every refusal is an answer (module docstring)
                return response_type(status=refusal(method.__name__, exc))

        return handler

    return wrap


def refusal(rpc: str, error: Exception) -> definition_pb2.Status:
    answer = status_of(error)
    if answer.code == Code.INTERNAL_SERVER_ERROR and not isinstance(error, CoreError):
        log.exception("gRPC %s failed", rpc)
    else:
        log.debug("gRPC %s refused: %s %s", rpc, Code.Name(answer.code), answer.message)
    return answer


def _name(resource: definition_pb2.Resource, what: str) -> str:
    if resource.resource_namespace:
        raise RequestError(
            Code.BAD_REQUEST,
            f"{what} {resource.name!r}: namespace {resource.resource_namespace!r} given, but mqgate has no namespaces"
            " yet; leave ClientConfiguration's namespace empty",
        )
    if not resource.name:
        code = Code.ILLEGAL_TOPIC if what == "topic" else Code.ILLEGAL_CONSUMER_GROUP
        raise RequestError(code, f"the request names no {what}")
    return resource.name


def _combined(codes: list[int]) -> definition_pb2.Status:
    """One status for several entries: theirs when they agree, MULTIPLE_RESULTS when they do not."""
    distinct = set(codes)
    if len(distinct) == 1:
        code = distinct.pop()
        return status(code, Code.Name(code))
    return status(Code.MULTIPLE_RESULTS, "entries have different results; see each entry's status")


class MessagingService(MessagingServiceServicer):
    def __init__(self, broker: Broker, *, max_body_bytes: int, access: AccessControl | None = None) -> None:
        self.broker = broker
        self.max_body_bytes = max_body_bytes
        self.access = access
        self.pop = PopService.of(broker)
        self.telemetry = Telemetry(broker, max_body_bytes=max_body_bytes, release=self._release_held)
        self.sessions = self.telemetry.sessions
        # Where clients reach us when a request does not say (set by core.grpc.server once it listens).
        self.own_endpoints = definition_pb2.Endpoints()
        self._turns: dict[str, int] = {}
        self._filters: dict[tuple[str, str], MessageFilter | None] = {}
        self._renewer: asyncio.Task[None] | None = None

    # --- life -------------------------------------------------------------------------------------------------

    def start(self) -> None:
        self.telemetry.start()
        self._renewer = asyncio.get_running_loop().create_task(self._renew_held())

    async def close(self) -> None:
        if self._renewer is not None:
            self._renewer.cancel()
            await asyncio.gather(self._renewer, return_exceptions=True)
        await self.telemetry.close()

    # --- common -------------------------------------------------------------------------------------------------

    def _check(self, context: grpc.aio.ServicerContext, *needs: tuple[ResourceKind, str, Action]) -> None:
        """Authenticate the call and check what it needs (core.grpc.access_control), when access control is on."""
        access = self.access
        if access is not None:
            access_key = access.authenticate(context.invocation_metadata() or ())
            for kind, name, action in needs:
                access.check(access_key, kind, name, action)

    def _endpoints(self, given: definition_pb2.Endpoints) -> definition_pb2.Endpoints:
        return given if given.addresses else self.own_endpoints

    def _filter(self, expression: definition_pb2.FilterExpression) -> MessageFilter | None:
        kind = ExpressionType.SQL92 if expression.type == FilterType.SQL else ExpressionType.TAG
        text = expression.expression or "*"
        key = (kind, text)
        if key in self._filters:
            return self._filters[key]
        compiled = None if kind == ExpressionType.TAG and text.strip() == "*" else build_filter(kind, text)
        if len(self._filters) >= MAX_CACHED_FILTERS:
            self._filters.clear()
        self._filters[key] = compiled
        return compiled

    # --- routes and heartbeats ----------------------------------------------------------------------------------

    @unary(pb.QueryRouteResponse)
    async def QueryRoute(self, request: pb.QueryRouteRequest, context: grpc.aio.ServicerContext) -> Any:
        topic = _name(request.topic, "topic")
        self._check(context, (ResourceKind.TOPIC, topic, Action.ANY))
        config = self.broker.route(topic).config
        broker = broker_of(self.broker.config.broker_name, self._endpoints(request.endpoints))
        return pb.QueryRouteResponse(status=ok(), message_queues=message_queues(config, broker))

    @unary(pb.QueryAssignmentResponse)
    async def QueryAssignment(self, request: pb.QueryAssignmentRequest, context: grpc.aio.ServicerContext) -> Any:
        topic, group = _name(request.topic, "topic"), _name(request.group, "consumer group")
        self._check(context, (ResourceKind.TOPIC, topic, Action.SUB), (ResourceKind.GROUP, group, Action.SUB))
        config = self.broker.topic_config(topic)
        orderly = self.broker.groups.get_or_auto_create(group).consume_message_orderly
        broker = broker_of(self.broker.config.broker_name, self._endpoints(request.endpoints))
        return pb.QueryAssignmentResponse(status=ok(), assignments=assignments(config, broker, orderly))

    @unary(pb.HeartbeatResponse)
    async def Heartbeat(self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext) -> Any:
        client_id = self.telemetry.client_id(context)
        if request.HasField("group"):
            group = _name(request.group, "consumer group")
            self._check(context, (ResourceKind.GROUP, group, Action.SUB))
            self.broker.groups.get_or_auto_create(group)
        else:
            self._check(context)
        self.sessions.touch(client_id)
        return pb.HeartbeatResponse(status=ok())

    @unary(pb.NotifyClientTerminationResponse)
    async def NotifyClientTermination(
        self, request: pb.NotifyClientTerminationRequest, context: grpc.aio.ServicerContext
    ) -> Any:
        self._check(context)
        client_id = self.telemetry.client_id(context)
        await self.telemetry.end_session(client_id)
        return pb.NotifyClientTerminationResponse(status=ok())

    async def Telemetry(
        self, request_iterator: AsyncIterator[pb.TelemetryCommand], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.TelemetryCommand]:
        try:
            self._check(context)
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
                group = _name(settings.subscription.group, "consumer group")
                needs.append((ResourceKind.GROUP, group, Action.SUB))
                for entry in settings.subscription.subscriptions:
                    needs.append((ResourceKind.TOPIC, _name(entry.topic, "topic"), Action.SUB))
            elif settings.HasField("publishing"):
                needs += [(ResourceKind.TOPIC, _name(t, "topic"), Action.PUB) for t in settings.publishing.topics]
            self._check(context, *needs)

        return check

    # --- sending ------------------------------------------------------------------------------------------------

    @unary(pb.SendMessageResponse)
    async def SendMessage(self, request: pb.SendMessageRequest, context: grpc.aio.ServicerContext) -> Any:
        if not request.messages:
            raise RequestError(Code.MESSAGE_CORRUPTED, "no message to send")
        first = request.messages[0].topic
        topic = _name(first, "topic")
        if any(m.topic != first for m in request.messages):
            raise RequestError(Code.MESSAGE_CORRUPTED, "topic in message is not same: a batch holds one topic")
        self._check(context, (ResourceKind.TOPIC, topic, Action.PUB))
        for m in request.messages:
            if m.system_properties.lite_topic or m.system_properties.HasField("priority"):
                raise RequestError(
                    Code.NOT_IMPLEMENTED, "lite topics and priority messages are not implemented by mqgate yet"
                )
        now_ms = time.time_ns() // 1_000_000
        peer = _peer_host(context)
        max_delay_ms = self.broker.config.timer_max_delay_s * 1000
        messages = [
            to_core(m, peer_host=peer, max_body_bytes=self.max_body_bytes, max_delay_ms=max_delay_ms, now_ms=now_ms)
            for m in request.messages
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
        return pb.SendMessageResponse(status=_combined([e.status.code for e in entries]), entries=entries)

    @unary(pb.EndTransactionResponse)
    async def EndTransaction(self, request: pb.EndTransactionRequest, context: grpc.aio.ServicerContext) -> Any:
        topic = _name(request.topic, "topic")
        self._check(context, (ResourceKind.TOPIC, topic, Action.PUB))
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
        raise RequestError(Code.NOT_IMPLEMENTED, "RecallMessage is not implemented by mqgate yet")

    @unary(pb.SyncLiteSubscriptionResponse)
    async def SyncLiteSubscription(
        self, request: pb.SyncLiteSubscriptionRequest, context: grpc.aio.ServicerContext
    ) -> Any:
        raise RequestError(Code.NOT_IMPLEMENTED, "lite topics are not implemented by mqgate yet")

    # --- receiving ----------------------------------------------------------------------------------------------

    async def ReceiveMessage(
        self, request: pb.ReceiveMessageRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ReceiveMessageResponse]:
        """Pop up to batch_size messages of the topic (every queue: the proxy ignores the queue id), waiting up to
        the long-polling time; status first, then the messages, then the delivery timestamp, as the proxy writes."""
        popped: list[Any] = []
        sent = 0
        group = ""
        try:
            group = _name(request.group, "consumer group")
            topic = _name(request.message_queue.topic, "topic")
            self._check(context, (ResourceKind.TOPIC, topic, Action.SUB), (ResourceKind.GROUP, group, Action.SUB))
            poll_ms = self._polling_ms(request, context)
            if request.auto_renew:
                invisible_ms = RENEW_SLICE_MS
                session = self.sessions.touch(self.telemetry.client_id(context))
            else:
                invisible_ms = duration_ms(request.invisible_duration)
                if not MIN_RECEIVE_INVISIBLE_MS <= invisible_ms <= MAX_INVISIBLE_MS:
                    raise RequestError(
                        Code.ILLEGAL_INVISIBLE_TIME,
                        f"invisible duration {invisible_ms} ms: receive with {MIN_RECEIVE_INVISIBLE_MS} ms to"
                        f" {MAX_INVISIBLE_MS} ms (12 hours)",
                    )
                session = None
            message_filter = self._filter(request.filter_expression)
            popped = await self.pop.pop(group, topic, request.batch_size, invisible_ms, message_filter, poll_ms)
            if session is not None:
                now = _now_ms()
                for p in popped:
                    session.held.add(group, p.receipt_handle, now)
            if not popped:
                yield pb.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))
            else:
                yield pb.ReceiveMessageResponse(status=ok())
                for p in popped:
                    yield pb.ReceiveMessageResponse(
                        message=to_proto(
                            p.message,
                            receipt_handle=p.receipt_handle,
                            delivery_attempt=p.delivery_attempt,
                            invisible_ms=invisible_ms,
                        )
                    )
                    sent += 1
        except Exception as exc:
            yield pb.ReceiveMessageResponse(status=refusal("ReceiveMessage", exc))
        finally:
            if sent < len(popped):
                # The client went away before it got them: visible again soon, for another consumer (the proxy's
                # NACK_INVISIBLE_TIME).
                for p in popped[sent:]:
                    self._let_go(group, p.receipt_handle)
        yield pb.ReceiveMessageResponse(delivery_timestamp=to_timestamp(_now_ms()))

    def _polling_ms(self, request: pb.ReceiveMessageRequest, context: grpc.aio.ServicerContext) -> int:
        remaining_s = context.time_remaining()
        remaining_ms = None if remaining_s is None else int(remaining_s * 1000) - DEADLINE_MARGIN_MS
        if request.HasField("long_polling_timeout"):
            wanted = duration_ms(request.long_polling_timeout)
        else:
            wanted = MAX_LONG_POLLING_MS if remaining_ms is None else remaining_ms // 2
        wanted = min(max(wanted, MIN_LONG_POLLING_MS), MAX_LONG_POLLING_MS)
        if remaining_ms is not None and wanted > remaining_ms:
            if remaining_ms < MIN_LONG_POLLING_MS:
                raise RequestError(
                    Code.ILLEGAL_POLLING_TIME,
                    "The deadline time remaining is not enough for polling, please check network condition",
                )
            wanted = remaining_ms
        return wanted

    def _let_go(self, group: str, handle: str) -> None:
        try:
            self.pop.change_invisible_duration(group, handle, CLEAR_INVISIBLE_MS)
        except CoreError as exc:
            log.debug("group %r: message not made visible again (%s)", group, exc)

    def _release_held(self, client_id: str, held: list[Any]) -> None:
        for h in held:
            self._let_go(h.group, h.handle)
        if held:
            log.info("client %s is gone: %d messages it held are visible again in 1 s", client_id, len(held))

    async def _renew_held(self) -> None:
        from core.grpc.held_messages import RENEW_PERIOD_S

        while True:
            await asyncio.sleep(RENEW_PERIOD_S)
            now = _now_ms()
            for session in self.sessions:
                for given, held in session.held.due(now):
                    try:
                        handle = self.pop.change_invisible_duration(held.group, held.handle, RENEW_SLICE_MS)
                    except CoreError as exc:
                        log.debug("client %s: message no longer renewed (%s)", session.client_id, exc)
                        session.held.drop(given)
                    else:
                        session.held.renewed(given, handle, now)

    def _handle(self, context: grpc.aio.ServicerContext, given: str) -> str:
        """The newest handle of a message the client names with `given`, no longer renewed for it."""
        client_id = self.telemetry.client_id(context, required=False)
        session = self.sessions.find(client_id) if client_id else None
        return session.held.take(given) if session is not None else given

    @unary(pb.AckMessageResponse)
    async def AckMessage(self, request: pb.AckMessageRequest, context: grpc.aio.ServicerContext) -> Any:
        group, topic = _name(request.group, "consumer group"), _name(request.topic, "topic")
        self._check(context, (ResourceKind.TOPIC, topic, Action.SUB), (ResourceKind.GROUP, group, Action.SUB))
        if not request.entries:
            raise RequestError(Code.BAD_REQUEST, "no entry to ack")
        entries = []
        for entry in request.entries:
            try:
                if entry.lite_topic:
                    raise RequestError(Code.NOT_IMPLEMENTED, "lite topics are not implemented by mqgate yet")
                self.pop.ack(group, self._handle(context, entry.receipt_handle))
                answer = ok()
            except Exception as exc:
                answer = refusal("AckMessage", exc)
            given = entry.receipt_handle
            entries.append(pb.AckMessageResultEntry(message_id=entry.message_id, receipt_handle=given, status=answer))
        return pb.AckMessageResponse(status=_combined([e.status.code for e in entries]), entries=entries)

    @unary(pb.ChangeInvisibleDurationResponse)
    async def ChangeInvisibleDuration(
        self, request: pb.ChangeInvisibleDurationRequest, context: grpc.aio.ServicerContext
    ) -> Any:
        group, topic = _name(request.group, "consumer group"), _name(request.topic, "topic")
        self._check(context, (ResourceKind.TOPIC, topic, Action.SUB), (ResourceKind.GROUP, group, Action.SUB))
        if request.lite_topic or request.suspend:
            raise RequestError(Code.NOT_IMPLEMENTED, "lite topics and suspend are not implemented by mqgate yet")
        invisible_ms = duration_ms(request.invisible_duration)
        if not 0 <= invisible_ms <= MAX_INVISIBLE_MS:
            raise RequestError(
                Code.ILLEGAL_INVISIBLE_TIME, f"invisible duration {invisible_ms} ms: give 0 to {MAX_INVISIBLE_MS} ms"
            )
        handle = self.pop.change_invisible_duration(group, self._handle(context, request.receipt_handle), invisible_ms)
        return pb.ChangeInvisibleDurationResponse(status=ok(), receipt_handle=handle)

    @unary(pb.ForwardMessageToDeadLetterQueueResponse)
    async def ForwardMessageToDeadLetterQueue(
        self, request: pb.ForwardMessageToDeadLetterQueueRequest, context: grpc.aio.ServicerContext
    ) -> Any:
        group, topic = _name(request.group, "consumer group"), _name(request.topic, "topic")
        self._check(context, (ResourceKind.TOPIC, topic, Action.SUB), (ResourceKind.GROUP, group, Action.SUB))
        if request.lite_topic:
            raise RequestError(Code.NOT_IMPLEMENTED, "lite topics are not implemented by mqgate yet")
        reason = (
            f"forwarded by its consumer after delivery attempt {request.delivery_attempt} of"
            f" {request.max_delivery_attempts}"
        )
        await self.pop.dead_letter(group, self._handle(context, request.receipt_handle), reason)
        return pb.ForwardMessageToDeadLetterQueueResponse(status=ok())

    # --- offsets and pulls (clients that track offsets themselves) ----------------------------------------------

    def _queue(self, queue: definition_pb2.MessageQueue) -> tuple[str, int]:
        topic = _name(queue.topic, "topic")
        config = self.broker.topic_config(topic)
        if not 0 <= queue.id < config.read_queue_nums:
            raise RequestError(
                Code.BAD_REQUEST, f"topic {topic!r} has queues 0 to {config.read_queue_nums - 1}, not {queue.id}"
            )
        return topic, queue.id

    @unary(pb.QueryOffsetResponse)
    async def QueryOffset(self, request: pb.QueryOffsetRequest, context: grpc.aio.ServicerContext) -> Any:
        topic, queue_id = self._queue(request.message_queue)
        self._check(context, (ResourceKind.TOPIC, topic, Action.SUB))
        policy = request.query_offset_policy
        if policy == pb.QueryOffsetPolicy.BEGINNING:
            offset = self.broker.min_offset(topic, queue_id)
        elif policy == pb.QueryOffsetPolicy.END:
            offset = self.broker.max_offset(topic, queue_id)
        else:
            offset = self.broker.search_offset(topic, queue_id, _ms(request.timestamp))
        return pb.QueryOffsetResponse(status=ok(), offset=offset)

    @unary(pb.GetOffsetResponse)
    async def GetOffset(self, request: pb.GetOffsetRequest, context: grpc.aio.ServicerContext) -> Any:
        group = _name(request.group, "consumer group")
        topic, queue_id = self._queue(request.message_queue)
        self._check(context, (ResourceKind.TOPIC, topic, Action.SUB), (ResourceKind.GROUP, group, Action.SUB))
        offset = self.broker.query_offset(group, topic, queue_id)
        if offset < 0:
            raise RequestError(Code.OFFSET_NOT_FOUND, f"group {group!r} has no offset in {topic!r} queue {queue_id}")
        return pb.GetOffsetResponse(status=ok(), offset=offset)

    @unary(pb.UpdateOffsetResponse)
    async def UpdateOffset(self, request: pb.UpdateOffsetRequest, context: grpc.aio.ServicerContext) -> Any:
        group = _name(request.group, "consumer group")
        topic, queue_id = self._queue(request.message_queue)
        self._check(context, (ResourceKind.TOPIC, topic, Action.SUB), (ResourceKind.GROUP, group, Action.SUB))
        if request.offset < 0:
            raise RequestError(Code.ILLEGAL_OFFSET, f"offset {request.offset} is negative")
        self.broker.groups.get_or_auto_create(group)
        self.broker.commit_offset(group, topic, queue_id, request.offset)
        return pb.UpdateOffsetResponse(status=ok())

    async def PullMessage(
        self, request: pb.PullMessageRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.PullMessageResponse]:
        """Read a queue from an offset: status, the messages, then the next offset."""
        try:
            group = _name(request.group, "consumer group")
            topic, queue_id = self._queue(request.message_queue)
            self._check(context, (ResourceKind.TOPIC, topic, Action.SUB), (ResourceKind.GROUP, group, Action.SUB))
            poll_ms = min(max(duration_ms(request.long_polling_timeout), 0), MAX_LONG_POLLING_MS)
            batch = request.batch_size or 32
            result = await self.broker.pull(
                group, topic, queue_id, request.offset, batch, self._filter(request.filter_expression), poll_ms
            )
        except Exception as exc:
            yield pb.PullMessageResponse(status=refusal("PullMessage", exc))
            return
        if result.status is PullStatus.FOUND:
            yield pb.PullMessageResponse(status=ok())
            for stored in result.messages:
                yield pb.PullMessageResponse(message=to_proto(stored))
        elif result.status is PullStatus.OFFSET_ILLEGAL:
            yield pb.PullMessageResponse(
                status=status(
                    Code.ILLEGAL_OFFSET, f"offset {request.offset} is outside {result.min_offset}..{result.max_offset}"
                )
            )
        else:
            yield pb.PullMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))
        yield pb.PullMessageResponse(next_offset=result.next_begin_offset)


def _send_entry(result: SendResult, message: definition_pb2.Message) -> pb.SendResultEntry:
    if result.status is SendStatus.SEND_OK:
        is_transaction = message.system_properties.message_type == definition_pb2.MessageType.TRANSACTION
        return pb.SendResultEntry(
            status=ok(),
            message_id=result.msg_id,
            transaction_id=result.offset_msg_id if is_transaction else "",
            offset=result.queue_offset,
        )
    code = Code.MASTER_PERSISTENCE_TIMEOUT if result.status is SendStatus.FLUSH_DISK_TIMEOUT else Code.INTERNAL_ERROR
    return pb.SendResultEntry(
        status=status(code, f"send message failed, sendStatus={result.status.value}"), message_id=result.msg_id
    )


def _peer_host(context: grpc.aio.ServicerContext) -> str:
    # "ipv4:127.0.0.1:5555", "ipv6:[::1]:5555"
    peer = context.peer() or ""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return "127.0.0.1"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _ms(value: Any) -> int:
    return int(value.seconds) * 1000 + value.nanos // 1_000_000
