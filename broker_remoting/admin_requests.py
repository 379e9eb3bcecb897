"""What `mqadmin` asks a broker to show and change besides topics (RocketMQ's AdminBrokerProcessor), on the core's
BrokerAdmin: what `mqgate admin` shows over HTTP, over this protocol.

    GET_TOPIC_STATS_INFO 202          topic: each queue's min and max offset and last store time (topicStatus)
    GET_CONSUME_STATS 208             consumerGroup [, topic]: broker and consumer offsets per queue
                                      (consumerProgress)
    GET_CONSUMER_CONNECTION_LIST 203  consumerGroup: its live members (consumerConnection); CONSUMER_NOT_ONLINE 206
                                      when it has none
    UPDATE_AND_CREATE_SUBSCRIPTIONGROUP 200   body: a SubscriptionGroupConfig (updateSubGroup)
    GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201      every group's config
    DELETE_SUBSCRIPTIONGROUP 207      groupName (deleteSubGroup)
    GET_BROKER_RUNTIME_INFO 28        a table of figures (brokerStatus), and mqgate's grpcEndpoint: where this
                                      process's gRPC endpoint is reached (other groups' routes name it)
    INVOKE_BROKER_TO_RESET_OFFSET 222 topic, group, timestamp: the group's offsets moved to that time
                                      (resetOffsetByTime)

Maps keyed by a message queue are written as fastjson writes them (remoting/java_json.py).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from core import Broker
from remoting.channel import Channel
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingRequestError
from remoting.java_json import body_with, object_keyed, queue_key
from remoting.request_headers import HeaderFields

_BOOT_MS = time.time_ns() // 1_000_000


class AdminRequests:
    def __init__(self, broker: Broker, grpc_endpoint: Callable[[], str | None] = lambda: None) -> None:
        self._broker = broker
        self._grpc_endpoint = grpc_endpoint

    def _queue(self, topic: str, queue_id: int) -> str:
        return queue_key(topic, self._broker.config.broker_name, queue_id)

    async def topic_stats(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = HeaderFields(request).text("topic")
        table = object_keyed(
            (
                self._queue(topic, status.queue_id),
                {
                    "minOffset": status.min_offset,
                    "maxOffset": status.max_offset,
                    "lastUpdateTimestamp": status.last_update_ms or 0,
                },
            )
            for status in self._broker.admin.topic_status(topic)
        )
        return request.reply(ResponseCode.SUCCESS, body=body_with({}, offsetTable=table))

    async def consume_stats(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        fields = HeaderFields(request)
        group, topic = fields.text("consumerGroup"), fields.text("topic", "")
        rows = [row for row in self._broker.admin.consumer_progress(group) if not topic or row.topic == topic]
        table = object_keyed(
            (
                self._queue(row.topic, row.queue_id),
                {
                    "brokerOffset": row.broker_offset,
                    "consumerOffset": max(row.consumer_offset, 0),
                    "pullOffset": max(row.consumer_offset, 0),
                    "lastTimestamp": row.last_consume_ms or 0,
                },
            )
            for row in rows
        )
        return request.reply(ResponseCode.SUCCESS, body=body_with({"consumeTps": 0.0}, offsetTable=table))

    async def consumer_connections(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group = HeaderFields(request).text("consumerGroup")
        members = self._broker.admin.members(group)
        if not members:
            return request.reply(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{group}] not online")
        body = {
            "connectionSet": [
                {"clientId": m.client_id, "clientAddr": "", "language": "OTHER", "version": 0} for m in members
            ],
            "subscriptionTable": {
                topic: {"topic": topic, "subString": "*", "expressionType": "TAG", "tagsSet": [], "codeSet": []}
                for m in members
                for topic in m.topics
            },
            "consumeType": "CONSUME_PASSIVELY" if members[0].consume_type == "PUSH" else "CONSUME_ACTIVELY",
            "messageModel": members[0].message_model,
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
        }
        return request.reply(ResponseCode.SUCCESS, body=json.dumps(body).encode())

    async def update_group(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        try:
            data = json.loads(request.body)
            group = data["groupName"]
            retry_max_times = data.get("retryMaxTimes")
            consume_enable = data.get("consumeEnable")
        except (ValueError, TypeError, KeyError) as exc:
            raise RemotingRequestError(
                f"UPDATE_AND_CREATE_SUBSCRIPTIONGROUP body is not a SubscriptionGroupConfig: {exc}"
            ) from None
        self._broker.admin.create_group(str(group), retry_max_times, consume_enable)
        return request.reply(ResponseCode.SUCCESS)

    async def all_groups(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        admin = self._broker.admin
        table = {}
        for group in admin.groups():
            config = admin.group_config(group)
            if config is not None:
                table[group] = config.to_json()
        body = {
            "subscriptionGroupTable": table,
            "dataVersion": {"timestamp": time.time_ns() // 1_000_000, "counter": 0},
        }
        return request.reply(ResponseCode.SUCCESS, body=json.dumps(body).encode())

    async def delete_group(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        self._broker.admin.delete_group(HeaderFields(request).text("groupName"))
        return request.reply(ResponseCode.SUCCESS)

    async def runtime_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        broker = self._broker
        counts = broker.traffic.snapshot().values()
        table = {
            "brokerVersionDesc": "mqgate (RocketMQ V4_9_4 protocol)",
            "bootTimestamp": str(_BOOT_MS),
            "brokerName": broker.config.broker_name,
            "topicCount": str(len(broker.topic_configs())),
            "groupCount": str(len(broker.admin.groups())),
            "brokerRole": broker.ha.role.value,
            "commitLogMaxOffset": str(broker.ha.state().log_end),
        }
        table["msgPutTotalTodayNow"] = str(sum(c.messages_in for c in counts))
        table["msgGetTotalTodayNow"] = str(sum(c.messages_out for c in counts))
        endpoint = self._grpc_endpoint()
        if endpoint is not None:  # mqgate's: where other groups' gRPC endpoints send clients for this group
            table["grpcEndpoint"] = endpoint
        return request.reply(ResponseCode.SUCCESS, body=json.dumps({"table": table}).encode())

    async def reset_offsets(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        fields = HeaderFields(request)
        topic = fields.text("topic")
        offsets = self._broker.admin.reset_offsets_by_time(fields.text("group"), topic, fields.int("timestamp"))
        table = object_keyed((self._queue(topic, queue_id), offset) for queue_id, offset in sorted(offsets.items()))
        return request.reply(ResponseCode.SUCCESS, body=body_with({}, offsetTable=table))
