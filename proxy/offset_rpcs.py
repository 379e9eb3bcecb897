"""RPCs of clients that keep their own offsets (QueryOffset, GetOffset, UpdateOffset, PullMessage), on the broker's
offsets and pulls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc

from acl.access_control import Action, ResourceKind
from core import PullStatus
from proxy.consumer_rpcs import MAX_LONG_POLLING_MS
from proxy.message_codec import duration_ms, timestamp_ms, to_proto
from proxy.rpc_support import ServiceState, refusal, resource_name, unary
from proxy.status_codes import RequestError, ok, status
from proxy.stubs import Code, definition_pb2
from proxy.stubs import service_pb2 as pb


class OffsetRpcs:
    """The RPCs of clients that keep their own offsets, served by MessagingService as its own."""

    def __init__(self, state: ServiceState) -> None:
        self.state = state
        self.broker = state.broker

    def _queue(self, queue: definition_pb2.MessageQueue) -> tuple[str, int]:
        topic = resource_name(queue.topic, "topic")
        config = self.broker.topic_config(topic)
        if not 0 <= queue.id < config.read_queue_nums:
            raise RequestError(
                Code.BAD_REQUEST, f"topic {topic!r} has queues 0 to {config.read_queue_nums - 1}, not {queue.id}"
            )
        return topic, queue.id

    @unary(pb.QueryOffsetResponse)
    async def QueryOffset(self, request: pb.QueryOffsetRequest, context: grpc.aio.ServicerContext) -> Any:
        topic, queue_id = self._queue(request.message_queue)
        self.state.check(context, (ResourceKind.TOPIC, topic, Action.SUB))
        policy = request.query_offset_policy
        if policy == pb.QueryOffsetPolicy.BEGINNING:
            offset = self.broker.min_offset(topic, queue_id)
        elif policy == pb.QueryOffsetPolicy.END:
            offset = self.broker.max_offset(topic, queue_id)
        else:
            offset = self.broker.search_offset(topic, queue_id, timestamp_ms(request.timestamp))
        return pb.QueryOffsetResponse(status=ok(), offset=offset)

    @unary(pb.GetOffsetResponse)
    async def GetOffset(self, request: pb.GetOffsetRequest, context: grpc.aio.ServicerContext) -> Any:
        group = resource_name(request.group, "consumer group")
        topic, queue_id = self._queue(request.message_queue)
        self.state.check(context, (ResourceKind.TOPIC, topic, Action.SUB), (ResourceKind.GROUP, group, Action.SUB))
        offset = self.broker.query_offset(group, topic, queue_id)
        if offset < 0:
            raise RequestError(Code.OFFSET_NOT_FOUND, f"group {group!r} has no offset in {topic!r} queue {queue_id}")
        return pb.GetOffsetResponse(status=ok(), offset=offset)

    @unary(pb.UpdateOffsetResponse)
    async def UpdateOffset(self, request: pb.UpdateOffsetRequest, context: grpc.aio.ServicerContext) -> Any:
        group = resource_name(request.group, "consumer group")
        topic, queue_id = self._queue(request.message_queue)
        self.state.check(context, (ResourceKind.TOPIC, topic, Action.SUB), (ResourceKind.GROUP, group, Action.SUB))
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
            group = resource_name(request.group, "consumer group")
            topic, queue_id = self._queue(request.message_queue)
            self.state.check(context, (ResourceKind.TOPIC, topic, Action.SUB), (ResourceKind.GROUP, group, Action.SUB))
            poll_ms = min(max(duration_ms(request.long_polling_timeout), 0), MAX_LONG_POLLING_MS)
            batch = request.batch_size or 32
            result = await self.broker.pull(
                group, topic, queue_id, request.offset, batch, self.state.filter(request.filter_expression), poll_ms
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
