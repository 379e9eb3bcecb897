"""Requests as RocketMQ 4 clients send them, for the door's tests: the Java client's field names (SEND_MESSAGE 10),
ali-ons's letters and JSON values (SEND_MESSAGE_V2 310), the C++ client's strings."""

from __future__ import annotations

import json

from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.message_codec import encode_properties


def send(
    topic: str, body: bytes, properties: dict[str, str] | None = None, queue_id: int = 0, v2: bool = False
) -> RemotingCommand:
    fields = {
        "producerGroup": "pg", "topic": topic, "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
        "queueId": str(queue_id), "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0",
        "properties": encode_properties({"UNIQ_KEY": f"U-{topic}-{body.hex()}"[:60], **(properties or {})}),
        "reconsumeTimes": "0", "unitMode": "false",
    }  # fmt: skip
    if v2:
        letters = dict(zip("abcdefghijk", fields.values(), strict=True))
        letters["k"] = False  # ali-ons sends JSON booleans and numbers: the header codec takes them as Java would
        letters["d"] = 4
        return RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=letters, body=body)  # type: ignore[arg-type]
    return RemotingCommand(RequestCode.SEND_MESSAGE, ext_fields=fields, body=body)


def pull(
    group: str, topic: str, queue_id: int, offset: int, *, suspend_ms: int = 0, commit: int | None = None,
    subscription: str | None = None, max_nums: int = 32,
) -> RemotingCommand:  # fmt: skip
    sys_flag = (0x2 if suspend_ms else 0) | (0x1 if commit is not None else 0) | (0x4 if subscription else 0)
    fields = {
        "consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
        "maxMsgNums": str(max_nums), "sysFlag": str(sys_flag), "commitOffset": str(commit or 0),
        "suspendTimeoutMillis": str(suspend_ms), "subVersion": "0", "expressionType": "TAG",
    }  # fmt: skip
    if subscription is not None:
        fields["subscription"] = subscription
    return RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=fields)


def heartbeat(client_id: str, consumer_group: str | None = None, topic: str = "t", producer_group: str | None = None,
              message_model: str | int = "CLUSTERING", expression: str = "*") -> RemotingCommand:  # fmt: skip
    data: dict[str, object] = {"clientID": client_id, "producerDataSet": [], "consumerDataSet": []}
    if producer_group:
        data["producerDataSet"] = [{"groupName": producer_group}]
    if consumer_group:
        data["consumerDataSet"] = [{
            "groupName": consumer_group, "consumeType": "CONSUME_PASSIVELY", "messageModel": message_model,
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET", "unitMode": False,
            "subscriptionDataSet": [{"topic": topic, "subString": expression, "expressionType": "TAG",
                                     "tagsSet": [], "codeSet": [], "subVersion": 1}],
        }]  # fmt: skip
    return RemotingCommand(RequestCode.HEART_BEAT, body=json.dumps(data).encode())


def fields(code: int, **values: object) -> RemotingCommand:
    return RemotingCommand(code, ext_fields={name: str(value) for name, value in values.items()})
