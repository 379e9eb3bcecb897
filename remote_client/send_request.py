"""A send as a remoting request (SEND_MESSAGE_V2 310, SEND_BATCH_MESSAGE 320: SendMessageRequestHeaderV2's short
field names), and its reply as the core's SendResult. Pure code.

The reply's code says how the message was stored: SUCCESS (SEND_OK), FLUSH_DISK_TIMEOUT, FLUSH_SLAVE_TIMEOUT,
SLAVE_NOT_AVAILABLE (stored, not confirmed as asked); any other code is a refusal (replies.py). Its msgId is the
offset message id (store host and commit-log offset; a batch's are joined by commas), queueOffset the first
message's offset, recallHandle a delay or timer message's handle (RocketMQ 5.3).
"""

from __future__ import annotations

from core import (
    BrokerError,
    IllegalArgumentError,
    Message,
    MessageQueue,
    SendResult,
    SendStatus,
    parse_offset_msg_id,
)
from remote_client.replies import refusal
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.message_codec import encode_batch, encode_properties

_STATUSES: dict[int, SendStatus] = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}
DEFAULT_TOPIC = "TBW102"
DEFAULT_TOPIC_QUEUE_NUMS = "4"


def _header(group: str, queue: MessageQueue, message: Message, properties: str, batch: bool) -> dict[str, str]:
    return {
        "a": group,
        "b": queue.topic,
        "c": DEFAULT_TOPIC,
        "d": DEFAULT_TOPIC_QUEUE_NUMS,
        "e": str(queue.queue_id),
        "f": str(message.sys_flag),
        "g": str(message.born_timestamp),
        "h": str(message.flag),
        "i": properties,
        "j": str(message.reconsume_times),
        "k": "false",
        "m": "true" if batch else "false",
        "n": queue.broker_name,
    }


def send_request(group: str, queue: MessageQueue, message: Message) -> RemotingCommand:
    header = _header(group, queue, message, encode_properties(message.properties), False)
    return RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=header, body=message.body)


def batch_request(group: str, queue: MessageQueue, messages: list[Message]) -> RemotingCommand:
    for message in messages:
        if message.sys_flag & 0x1:
            raise IllegalArgumentError("a batch's messages are not compressed: send a large body on its own")
    body = encode_batch([(m.flag, m.body, m.properties) for m in messages])
    header = _header(group, queue, messages[0], "", True)
    return RemotingCommand(RequestCode.SEND_BATCH_MESSAGE, ext_fields=header, body=body)


def send_result(reply: RemotingCommand, queue: MessageQueue, unique_ids: list[str], where: str) -> list[SendResult]:
    """The SendResults of a reply, one per message sent (`unique_ids`, their UNIQ_KEYs: one, or a batch's); raises
    the refusal's core error."""
    status = _STATUSES.get(reply.code)
    if status is None:
        raise refusal(reply, where)
    ext = reply.ext_fields
    offset_ids = ext.get("msgId", "").split(",")
    if len(offset_ids) != len(unique_ids):
        raise BrokerError(f"{where} answered {len(offset_ids)} message ids for {len(unique_ids)} messages")
    first_offset = int(ext.get("queueOffset", "0"))
    stored_in = MessageQueue(queue.topic, queue.broker_name, int(ext.get("queueId", str(queue.queue_id))))
    recall_handle = ext.get("recallHandle", "")
    results = []
    for index, (offset_id, unique_id) in enumerate(zip(offset_ids, unique_ids, strict=True)):
        host, commit_log_offset = parse_offset_msg_id(offset_id)
        results.append(
            SendResult(status, unique_id, stored_in, first_offset + index, commit_log_offset, host, recall_handle)
        )
    return results
