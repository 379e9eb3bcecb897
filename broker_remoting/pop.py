"""Pop consumption over remoting (RocketMQ 5's PopMessageProcessor, AckMessageProcessor and
ChangeInvisibleTimeProcessor), on the broker's PopService: the same pops, acks and invisible times the gRPC endpoint
serves, so a group may be read through either door.

    POP_MESSAGE 200050            consumerGroup, topic, maxMsgNums, invisibleTime (ms), pollTime (ms) [, expType,
                                  exp]: up to maxMsgNums messages of the topic (every queue: queueId is not
                                  read), each invisible to the group for invisibleTime; SUCCESS with the records,
                                  or POLLING_TIMEOUT 210 when none came within pollTime
    ACK_MESSAGE 200051            consumerGroup, topic, extraInfo: the message done
    CHANGE_MESSAGE_INVISIBLETIME  consumerGroup, topic, extraInfo, invisibleTime: invisible that long from now;
      200053                      the reply's extraInfo is the new handle
    NOTIFICATION 200054           consumerGroup, topic, pollTime: wait up to pollTime until a pop may find
                                  something, taking nothing; the reply's hasMsg says whether one may (RocketMQ 5's
                                  NotificationProcessor: a consumer of several brokers waits on all at once)

The handle (extraInfo) is mqgate's receipt handle, which each popped record carries in its POP_CK property. A Java
client builds its own extraInfo from the reply header instead (RocketMQ's ExtraInfoUtil layout); mqgate refuses that
at ack, naming the handle it cannot read (README: limits). A refused handle is the core's ReceiptHandleError, with
its reason in `coreProblem` (refusals.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from broker_remoting.records import records_body
from core import MAX_POP_LONG_POLL_MS, Broker, MessageFilter, PopService, StoredMessage, build_filter
from remoting.channel import Channel
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.message_codec import Host
from remoting.request_headers import HeaderFields

# Where a popped record carries its receipt handle (MessageConst.PROPERTY_POP_CK).
PROPERTY_POP_CK = "POP_CK"


class PopDoor:
    def __init__(self, broker: Broker, store_host: Callable[[], Host]) -> None:
        self._pop = PopService.of(broker)
        self._store_host = store_host
        self._filters: dict[tuple[str, str], MessageFilter | None] = {}

    def _filter(self, fields: HeaderFields) -> MessageFilter | None:
        key = (fields.text("expType", "TAG"), fields.text("exp", "*"))
        if key not in self._filters:
            every = key[0].upper() == "TAG" and key[1].strip() in ("", "*")
            self._filters[key] = None if every else build_filter(*key)
        return self._filters[key]

    async def pop(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        fields = HeaderFields(request)
        group, topic = fields.text("consumerGroup"), fields.text("topic")
        invisible_ms = fields.int("invisibleTime")
        popped = await self._pop.pop(
            group, topic, fields.int("maxMsgNums"), invisible_ms, self._filter(fields), fields.int("pollTime", 0)
        )
        header = {"popTime": str(time.time_ns() // 1_000_000), "invisibleTime": str(invisible_ms), "reviveQid": "0",
                  "restNum": "0"}  # fmt: skip
        if not popped:
            return request.reply(ResponseCode.POLLING_TIMEOUT, "no new message", ext_fields=header)
        messages = [_with_handle(p.message, p.receipt_handle) for p in popped]
        return request.reply(ResponseCode.SUCCESS, ext_fields=header, body=records_body(messages, self._store_host()))

    async def notification(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        fields = HeaderFields(request)
        group, topic = fields.text("consumerGroup"), fields.text("topic")
        poll_ms = min(max(fields.int("pollTime", 0), 0), MAX_POP_LONG_POLL_MS)
        has_message = await self._pop.wait(group, [topic], poll_ms / 1000)
        return request.reply(ResponseCode.SUCCESS, ext_fields={"hasMsg": "true" if has_message else "false"})

    async def ack(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        fields = HeaderFields(request)
        self._pop.ack(fields.text("consumerGroup"), fields.text("extraInfo"))
        return request.reply(ResponseCode.SUCCESS)

    async def change_invisible_time(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        fields = HeaderFields(request)
        invisible_ms = fields.int("invisibleTime")
        handle = self._pop.change_invisible_duration(
            fields.text("consumerGroup"), fields.text("extraInfo"), invisible_ms
        )
        header = {"popTime": str(time.time_ns() // 1_000_000), "invisibleTime": str(invisible_ms), "reviveQid": "0",
                  "extraInfo": handle}  # fmt: skip
        return request.reply(ResponseCode.SUCCESS, ext_fields=header)


def _with_handle(message: StoredMessage, handle: str) -> StoredMessage:
    """The message with its receipt handle among its properties (a copy: the store's own stays as it is)."""
    return StoredMessage(
        message.topic, message.body, message.queue_id, message.queue_offset, message.commit_log_offset,
        message.store_size, message.body_crc, message.flag, message.sys_flag, message.born_timestamp,
        message.born_host, message.store_timestamp, message.store_host, message.reconsume_times,
        message.prepared_transaction_offset, {**message.properties, PROPERTY_POP_CK: handle},
    )  # fmt: skip
