"""Pops as remoting requests (POP_MESSAGE 200050, ACK_MESSAGE 200051, CHANGE_MESSAGE_INVISIBLETIME 200053,
NOTIFICATION 200054) and a pop's reply as message views. Pure code.

A popped record carries its receipt handle in the POP_CK property (broker_remoting/pop.py); the view gets it and the
record loses it, so that a message reads as in process. POLLING_TIMEOUT is "nothing"; any other code than SUCCESS
is the refusal's core error.
"""

from __future__ import annotations

import time
from typing import TypeVar

from core import MessageView
from remote_client.records import stored_message
from remote_client.replies import refusal
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.message_codec import decode_records

PROPERTY_POP_CK = "POP_CK"

View = TypeVar("View", bound=MessageView)


def pop_request(
    group: str, topic: str, max_nums: int, invisible_ms: int, poll_ms: int, expression_type: str, expression: str
) -> RemotingCommand:
    fields = {
        "consumerGroup": group, "topic": topic, "queueId": "-1", "maxMsgNums": str(max_nums),
        "invisibleTime": str(invisible_ms), "pollTime": str(poll_ms), "bornTime": str(time.time_ns() // 1_000_000),
        "initMode": "1", "expType": expression_type, "exp": expression, "order": "false",
    }  # fmt: skip
    return RemotingCommand(RequestCode.POP_MESSAGE, ext_fields=fields)


def notification_request(group: str, topic: str, poll_ms: int) -> RemotingCommand:
    fields = {"consumerGroup": group, "topic": topic, "queueId": "-1", "pollTime": str(poll_ms),
              "bornTime": str(time.time_ns() // 1_000_000)}  # fmt: skip
    return RemotingCommand(RequestCode.NOTIFICATION, ext_fields=fields)


def ack_request(group: str, topic: str, handle: str) -> RemotingCommand:
    fields = {"consumerGroup": group, "topic": topic, "queueId": "-1", "extraInfo": handle, "offset": "-1"}
    return RemotingCommand(RequestCode.ACK_MESSAGE, ext_fields=fields)


def change_invisible_request(group: str, topic: str, handle: str, invisible_ms: int) -> RemotingCommand:
    fields = {"consumerGroup": group, "topic": topic, "queueId": "-1", "extraInfo": handle, "offset": "-1",
              "invisibleTime": str(invisible_ms)}  # fmt: skip
    return RemotingCommand(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, ext_fields=fields)


def popped_views(
    reply: RemotingCommand, broker_name: str, invisible_ms: int, where: str, view: type[View]
) -> list[View]:
    if reply.code == ResponseCode.POLLING_TIMEOUT:
        return []
    if reply.code != ResponseCode.SUCCESS:
        raise refusal(reply, where)
    until = time.monotonic() + invisible_ms / 1000
    views = []
    for record in decode_records(reply.body):
        properties = dict(record.properties)
        handle = properties.pop(PROPERTY_POP_CK, "")
        message = stored_message(record, properties)
        views.append(view(message, handle, record.reconsume_times + 1, until, broker_name))  # type: ignore[call-arg]
    return views
