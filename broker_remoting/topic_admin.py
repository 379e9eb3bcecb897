"""Topic administration over remoting (RocketMQ's AdminBrokerProcessor), what `mqadmin updateTopic`,
`deleteTopic` and `topicList` send a broker:

    UPDATE_AND_CREATE_TOPIC 17   topic, readQueueNums, writeQueueNums, perm [, order] [, attributes]: create the
                                 topic, or change it. attributes: RocketMQ 5's "+message.type=FIFO" (NORMAL, FIFO,
                                 DELAY, TRANSACTION or MIXED; unset, a new topic is NORMAL and a topic's stays);
                                 any other attribute, or a "-" that deletes one, is refused, naming it
    GET_ALL_TOPIC_CONFIG 21      body: TopicConfigSerializeWrapper's JSON, every topic
    GET_TOPIC_CONFIG 351         topic: body the topic's TopicConfig JSON (RocketMQ 5's TopicConfigAndQueueMapping,
                                 without a queue mapping), TOPIC_NOT_EXIST when there is none
    DELETE_TOPIC_IN_BROKER 215   topic: the topic, its queues and every group's offsets in it

The broker registers the changed table with its NameServers before it answers a change (registration.py), as
RocketMQ's does: a client that asks for the route next finds it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Awaitable, Callable

from broker_remoting.registration import topic_json
from core import Broker, MessageType, Perm
from remoting.channel import Channel
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingRequestError
from remoting.request_headers import HeaderFields

# RocketMQ 5's topic attribute of the message type (TopicAttributes.TOPIC_MESSAGE_TYPE_ATTRIBUTE).
MESSAGE_TYPE_ATTRIBUTE = "message.type"


def message_type_of(attributes: str) -> MessageType | None:
    """The message type an UPDATE_AND_CREATE_TOPIC's attributes set ("+message.type=FIFO", items joined by
    commas, as RocketMQ's AttributeParser writes them); None when they set none. RemotingRequestError for an
    attribute mqgate does not keep, rather than dropping it."""
    message_type = None
    for item in filter(None, (part.strip() for part in attributes.split(","))):
        key, _, value = item[1:].partition("=")
        if item[0] != "+" or key != MESSAGE_TYPE_ATTRIBUTE:
            raise RemotingRequestError(
                f"topic attribute {item!r} is not supported: mqgate keeps only +{MESSAGE_TYPE_ATTRIBUTE}=TYPE"
            )
        try:
            message_type = MessageType(value)
        except ValueError:
            allowed = ", ".join(kind.value for kind in MessageType)
            raise RemotingRequestError(f"topic attribute {item!r}: the message type is one of {allowed}") from None
    return message_type


class TopicAdmin:
    def __init__(self, broker: Broker, registered: Callable[[], Awaitable[None]]) -> None:
        self._broker = broker
        self._registered = registered  # registers the changed table with the NameServers, before the answer

    async def update(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        fields = HeaderFields(request)
        topic = fields.text("topic")
        reads, writes = fields.int("readQueueNums"), fields.int("writeQueueNums")
        perm = Perm(fields.int("perm", int(Perm.READ | Perm.WRITE)) & 7)
        message_type = message_type_of(fields.text("attributes", ""))
        self._broker.admin.create_topic(topic, reads, writes, perm, fields.bool("order"), message_type)
        await self._registered()
        return request.reply(ResponseCode.SUCCESS)

    async def all_configs(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        table = {config.topic_name: topic_json(config) for config in self._broker.topic_configs()}
        version = {"timestamp": time.time_ns() // 1_000_000, "counter": 0}
        body = json.dumps({"topicConfigTable": table, "dataVersion": version}).encode()
        return request.reply(ResponseCode.SUCCESS, body=body)

    async def config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = HeaderFields(request).text("topic")
        if not self._broker.has_topic(topic):
            return request.reply(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {topic}")
        return request.reply(
            ResponseCode.SUCCESS, body=json.dumps(topic_json(self._broker.topic_config(topic))).encode()
        )

    async def delete(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        self._broker.admin.delete_topic(HeaderFields(request).text("topic"))
        await self._registered()
        return request.reply(ResponseCode.SUCCESS)
