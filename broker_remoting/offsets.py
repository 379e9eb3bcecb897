"""Offsets over remoting (RocketMQ's ConsumerManageProcessor and the queue-bound codes of AdminBrokerProcessor):

    QUERY_CONSUMER_OFFSET 14     consumerGroup, topic, queueId -> offset; a group with no committed offset on a
                                 queue whose first message is still stored gets 0, as RocketMQ answers while that
                                 message is in memory; on a queue retention has cut, QUERY_NOT_FOUND 22 (the client
                                 then starts where its consumeFromWhere says); with setZeroIfNotFound=false (RocketMQ
                                 5), QUERY_NOT_FOUND whenever the group has none
    UPDATE_CONSUMER_OFFSET 15    consumerGroup, topic, queueId, commitOffset; with keepLarger=true (a slave giving
                                 back what consumers committed to it, broker_remoting/replication.py) only forward
    SEARCH_OFFSET_BY_TIMESTAMP 29  topic, queueId, timestamp -> offset
    GET_MAX_OFFSET 30, GET_MIN_OFFSET 31   topic, queueId -> offset

Every offset in a reply is a string (the C++ client reads no other).
"""

from __future__ import annotations

from core import Broker
from remoting.channel import Channel
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.request_headers import HeaderFields


class OffsetDoor:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def query(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        fields = HeaderFields(request)
        group, topic, queue_id = fields.text("consumerGroup"), fields.text("topic"), fields.int("queueId")
        offset = self._broker.query_offset(group, topic, queue_id)
        if offset < 0:
            # RocketMQ 5's setZeroIfNotFound (true unless a client says false): a group new to a queue never
            # trimmed starts at its first message, as the broker finds it in memory.
            zero_if_not_found = request.ext_fields.get("setZeroIfNotFound", "true").strip().lower() != "false"
            if not zero_if_not_found or self._broker.min_offset(topic, queue_id) > 0:
                return request.reply(
                    ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"
                )
            offset = 0
        return request.reply(ResponseCode.SUCCESS, ext_fields={"offset": str(offset)})

    async def update(self, channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        fields = HeaderFields(request)
        # keepLarger (mqgate's): a slave gives back an offset committed to it while its master was away.
        commit = (
            self._broker.master_copy.offset_given_back
            if request.ext_fields.get("keepLarger") == "true"
            else self._broker.commit_offset
        )
        commit(fields.text("consumerGroup"), fields.text("topic"), fields.int("queueId"), fields.int("commitOffset"))
        return None if request.is_oneway else request.reply(ResponseCode.SUCCESS)

    async def search(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        fields = HeaderFields(request)
        offset = self._broker.search_offset(fields.text("topic"), fields.int("queueId"), fields.int("timestamp"))
        return request.reply(ResponseCode.SUCCESS, ext_fields={"offset": str(offset)})

    async def max_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        fields = HeaderFields(request)
        offset = self._broker.max_offset(fields.text("topic"), fields.int("queueId"))
        return request.reply(ResponseCode.SUCCESS, ext_fields={"offset": str(offset)})

    async def min_offset(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        fields = HeaderFields(request)
        offset = self._broker.min_offset(fields.text("topic"), fields.int("queueId"))
        return request.reply(ResponseCode.SUCCESS, ext_fields={"offset": str(offset)})
