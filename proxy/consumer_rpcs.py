"""The consumer's RPCs (ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue) on the
broker's PopService, and the messages the endpoint keeps invisible for push consumers (proxy.held_messages).

A receive pops across every queue of the topic (the proxy ignores the request's queue id), waits up to its long
polling time (5 to 20 s, within the call's deadline), and answers status first, then the messages, then the
delivery timestamp, as the proxy writes them. Messages popped for a client that went away before it got them are
made visible again after a second (the proxy's NACK_INVISIBLE_TIME).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Any

import grpc

from acl.access_control import Action, ResourceKind
from core import MAX_INVISIBLE_MS, CoreError
from proxy.client_sessions import ClientSessions
from proxy.held_messages import CLEAR_INVISIBLE_MS, RENEW_PERIOD_S, RENEW_SLICE_MS, Held
from proxy.message_codec import duration_ms, to_proto, to_timestamp
from proxy.rpc_support import ServiceState, combined, now_ms, refusal, resource_name, unary
from proxy.status_codes import RequestError, ok, status
from proxy.stubs import Code
from proxy.stubs import service_pb2 as pb
from proxy.telemetry import Telemetry

log = logging.getLogger("proxy.service")

# The proxy's grpcClientConsumerMinLongPollingTimeoutMillis / MaxLongPollingTimeoutMillis, minInvisibleTimeMillsForRecv.
MIN_LONG_POLLING_MS = 5_000
MAX_LONG_POLLING_MS = 20_000
MIN_RECEIVE_INVISIBLE_MS = 10_000
# Left of a receive's deadline for the answer to travel back.
DEADLINE_MARGIN_MS = 200


class ConsumerRpcs:
    """The consumer's RPCs, served by MessagingService as its own; `telemetry` knows the clients and what push
    consumers hold."""

    def __init__(self, state: ServiceState, telemetry: Telemetry) -> None:
        self.state = state
        self.pop = state.pop
        self.telemetry = telemetry
        self.sessions: ClientSessions = telemetry.sessions

    async def ReceiveMessage(
        self, request: pb.ReceiveMessageRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ReceiveMessageResponse]:
        """Pop up to batch_size messages of the topic (every queue: the proxy ignores the queue id), waiting up to
        the long-polling time; status first, then the messages, then the delivery timestamp, as the proxy writes."""
        popped: list[Any] = []
        sent = 0
        group = ""
        try:
            group = resource_name(request.group, "consumer group")
            topic = resource_name(request.message_queue.topic, "topic")
            self.state.check(context, (ResourceKind.TOPIC, topic, Action.SUB), (ResourceKind.GROUP, group, Action.SUB))
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
            message_filter = self.state.filter(request.filter_expression)
            popped = await self.pop.pop(group, topic, request.batch_size, invisible_ms, message_filter, poll_ms)
            if session is not None:
                now = now_ms()
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
        yield pb.ReceiveMessageResponse(delivery_timestamp=to_timestamp(now_ms()))

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

    def release_held(self, client_id: str, held: list[Held]) -> None:
        for h in held:
            self._let_go(h.group, h.handle)
        if held:
            log.info("client %s is gone: %d messages it held are visible again in 1 s", client_id, len(held))

    async def renew_held(self) -> None:
        while True:
            await asyncio.sleep(RENEW_PERIOD_S)
            now = now_ms()
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
        if not self.sessions.holding:
            return given  # no push consumer holds anything: no client id to look up
        client_id = self.telemetry.client_id(context, required=False)
        session = self.sessions.find(client_id) if client_id else None
        return session.held.take(given) if session is not None else given

    @unary(pb.AckMessageResponse)
    async def AckMessage(self, request: pb.AckMessageRequest, context: grpc.aio.ServicerContext) -> Any:
        group, topic = resource_name(request.group, "consumer group"), resource_name(request.topic, "topic")
        self.state.check(context, (ResourceKind.TOPIC, topic, Action.SUB), (ResourceKind.GROUP, group, Action.SUB))
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
        return pb.AckMessageResponse(status=combined([e.status.code for e in entries]), entries=entries)

    @unary(pb.ChangeInvisibleDurationResponse)
    async def ChangeInvisibleDuration(
        self, request: pb.ChangeInvisibleDurationRequest, context: grpc.aio.ServicerContext
    ) -> Any:
        group, topic = resource_name(request.group, "consumer group"), resource_name(request.topic, "topic")
        self.state.check(context, (ResourceKind.TOPIC, topic, Action.SUB), (ResourceKind.GROUP, group, Action.SUB))
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
        group, topic = resource_name(request.group, "consumer group"), resource_name(request.topic, "topic")
        self.state.check(context, (ResourceKind.TOPIC, topic, Action.SUB), (ResourceKind.GROUP, group, Action.SUB))
        if request.lite_topic:
            raise RequestError(Code.NOT_IMPLEMENTED, "lite topics are not implemented by mqgate yet")
        reason = (
            f"forwarded by its consumer after delivery attempt {request.delivery_attempt} of"
            f" {request.max_delivery_attempts}"
        )
        await self.pop.dead_letter(group, self._handle(context, request.receipt_handle), reason)
        return pb.ForwardMessageToDeadLetterQueueResponse(status=ok())
