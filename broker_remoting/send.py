"""SEND_MESSAGE 10, SEND_MESSAGE_V2 310 and SEND_BATCH_MESSAGE 320 on the core (RocketMQ's SendMessageProcessor).

A send becomes a core Message with the header's topic, queue, flag, sys flag (a compressed body stays compressed,
as the broker stores it), born time, reconsume times and properties; the producer's properties mean what they mean
in RocketMQ (DELAY a delay level, TRAN_MSG and PGROUP a half message, KEYS, TAGS, UNIQ_KEY); the born host is the
connection's. A send to a group's retry topic whose reconsume times reached its limit goes to the group's dead-letter
topic instead (the Java consumer's fallback when its send-back failed).

The reply: SUCCESS for SEND_OK, FLUSH_DISK_TIMEOUT 10, FLUSH_SLAVE_TIMEOUT 12 and SLAVE_NOT_AVAILABLE 11 (each means
"stored"), with msgId the offset message id (for a batch, the ids joined by commas), queueId and queueOffset, all
strings. A refusal is answered in the protocol's words (refusals.py) and nothing is stored.
"""

from __future__ import annotations

from collections.abc import Callable

from core import (
    PROPERTY_DELAY_LEVEL,
    RETRY_PREFIX,
    Broker,
    Message,
    SendResult,
    SendStatus,
    ensure_dlq_topic,
    ensure_retry_topic,
)
from remoting.channel import Channel
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingRequestError
from remoting.message_codec import Host, MessageLayoutError, decode_batch, decode_properties, offset_message_id
from remoting.request_headers import SendHeader, send_header, send_reply_fields

_STATUS_CODES = {
    SendStatus.SEND_OK: ResponseCode.SUCCESS,
    SendStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    SendStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    SendStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}
# A group's retry limit when neither the request nor the group says (SubscriptionGroupConfig.retryMaxTimes).
DEFAULT_RETRY_MAX_TIMES = 16


class SendService:
    def __init__(self, broker: Broker, store_host: Callable[[], Host]) -> None:
        self._broker = broker
        self._store_host = store_host

    async def send(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        header = send_header(request)
        if header.batch or request.code == 320:
            return await self._send_batch(channel, request, header)
        message = Message(
            topic=header.topic,
            body=request.body,
            queue_id=header.queue_id,
            properties=decode_properties(header.properties),
            flag=header.flag,
            sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp,
            born_host=channel.peer_address,
            reconsume_times=header.reconsume_times,
        )
        self._retry_or_dead_letter(message, header)
        result = await self._broker.send(message)
        return self._reply(request, result, offset_message_id(self._store_host(), result.commit_log_offset))

    async def _send_batch(self, channel: Channel, request: RemotingCommand, header: SendHeader) -> RemotingCommand:
        try:
            decoded = decode_batch(request.body)
        except MessageLayoutError as exc:
            raise RemotingRequestError(f"SEND_BATCH_MESSAGE body: {exc}", ResponseCode.MESSAGE_ILLEGAL) from None
        if not decoded:
            raise RemotingRequestError("SEND_BATCH_MESSAGE body holds no message", ResponseCode.MESSAGE_ILLEGAL)
        common = decode_properties(header.properties)
        messages = [
            Message(
                topic=header.topic,
                body=body,
                queue_id=header.queue_id,
                properties={**common, **properties},
                flag=flag,
                sys_flag=header.sys_flag,
                born_timestamp=header.born_timestamp,
                born_host=channel.peer_address,
                reconsume_times=header.reconsume_times,
            )
            for flag, body, properties in decoded
        ]
        results = await self._broker.send_batch(messages)
        host = self._store_host()
        ids = ",".join(offset_message_id(host, result.commit_log_offset) for result in results)
        return self._reply(request, results[0], ids, worst=_worst(results))

    @staticmethod
    def _reply(
        request: RemotingCommand, result: SendResult, msg_id: str, worst: SendStatus | None = None
    ) -> RemotingCommand:
        fields = send_reply_fields(msg_id, result.message_queue.queue_id, result.queue_offset)
        if result.recall_handle:  # a delay or timer message's (RocketMQ 5.3's SendMessageResponseHeader.recallHandle)
            fields["recallHandle"] = result.recall_handle
        fields["MSG_REGION"] = "DefaultRegion"
        fields["TRACE_ON"] = "true"
        return request.reply(_STATUS_CODES[worst or result.status], ext_fields=fields)

    def _retry_or_dead_letter(self, message: Message, header: SendHeader) -> None:
        """A send to `%RETRY%group`: the retry topic made if missing; past the retry limit, the dead-letter topic."""
        if not message.topic.startswith(RETRY_PREFIX):
            return
        group = message.topic[len(RETRY_PREFIX) :]
        limit = header.max_reconsume_times
        if limit is None:
            config = self._broker.admin.group_config(group)
            limit = config.retry_max_times if config is not None else DEFAULT_RETRY_MAX_TIMES
        if header.reconsume_times >= limit:
            message.topic = ensure_dlq_topic(self._broker, group)
            message.queue_id = 0
            message.properties.pop(PROPERTY_DELAY_LEVEL, None)
        else:
            ensure_retry_topic(self._broker, group)


def _worst(results: list[SendResult]) -> SendStatus:
    """A batch's status: the first that is not SEND_OK (all are stored either way)."""
    return next((result.status for result in results if result.status is not SendStatus.SEND_OK), SendStatus.SEND_OK)
