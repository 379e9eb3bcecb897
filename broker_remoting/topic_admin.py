"""Topic administration over remoting (RocketMQ's AdminBrokerProcessor), what `mqadmin updateTopic`,
`deleteTopic` and `topicList` send a broker:

    UPDATE_AND_CREATE_TOPIC 17   topic, readQueueNums, writeQueueNums, perm [, order]: create the topic, or change
                                 it (its message type and attributes stay)
    GET_ALL_TOPIC_CONFIG 21      body: TopicConfigSerializeWrapper's JSON, every topic
    DELETE_TOPIC_IN_BROKER 215   topic: the topic, its queues and every group's offsets in it

The registration with the NameServers follows a change at once (registration.py).
"""

from __future__ import annotations

import json
import time

from broker_remoting.registration import topic_json
from core import Broker, Perm
from remoting.channel import Channel
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.request_headers import HeaderFields


class TopicAdmin:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def update(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        fields = HeaderFields(request)
        topic = fields.text("topic")
        reads, writes = fields.int("readQueueNums"), fields.int("writeQueueNums")
        perm = Perm(fields.int("perm", int(Perm.READ | Perm.WRITE)) & 7)
        self._broker.admin.create_topic(topic, reads, writes, perm, order=fields.bool("order"))
        return request.reply(ResponseCode.SUCCESS)

    async def all_configs(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        table = {config.topic_name: topic_json(config) for config in self._broker.topic_configs()}
        version = {"timestamp": time.time_ns() // 1_000_000, "counter": 0}
        body = json.dumps({"topicConfigTable": table, "dataVersion": version}).encode()
        return request.reply(ResponseCode.SUCCESS, body=body)

    async def delete(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        self._broker.admin.delete_topic(HeaderFields(request).text("topic"))
        return request.reply(ResponseCode.SUCCESS)
