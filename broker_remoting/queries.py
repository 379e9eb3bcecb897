"""Message look-ups over remoting (RocketMQ's QueryMessageProcessor), on the core's MessageQueries:

QUERY_MESSAGE 12        topic, key, maxNum, beginTimestamp, endTimestamp: the messages with that key, newest
                        first; with extField _UNIQUE_KEY_QUERY=true the key is a unique id (UNIQ_KEY). Body: the
                        records; QUERY_NOT_FOUND 22 when there is none.
VIEW_MESSAGE_BY_ID 33   offset: the record at that commit-log offset (a client decodes it from the offset
                        message id); SYSTEM_ERROR when no message starts there.
"""

from __future__ import annotations

from collections.abc import Callable

from broker_remoting.records import record_of, records_body
from core import END_OF_TIME_MS, MAX_QUERY_COUNT, Broker, MessageNotFoundError
from remoting.channel import Channel
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.message_codec import Host
from remoting.request_headers import HeaderFields

UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"


class QueryDoor:
    def __init__(self, broker: Broker, store_host: Callable[[], Host]) -> None:
        self._broker = broker
        self._store_host = store_host

    async def query(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        fields = HeaderFields(request)
        topic, key = fields.text("topic"), fields.text("key")
        queries = self._broker.queries
        if fields.bool(UNIQUE_KEY_QUERY):
            try:
                found = queries.by_unique_id(topic, key)
            except MessageNotFoundError:
                found = []
        else:
            found = queries.by_key(
                topic,
                key,
                max(0, fields.int("beginTimestamp", 0)),
                min(END_OF_TIME_MS, fields.int("endTimestamp", END_OF_TIME_MS)),
                max(1, min(MAX_QUERY_COUNT, fields.int("maxNum", 32))),
            )
        if not found:
            return request.reply(ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct")
        last = max(message.store_timestamp for message in found)
        return request.reply(
            ResponseCode.SUCCESS,
            ext_fields={"indexLastUpdateTimestamp": str(last), "indexLastUpdatePhyoffset": "0"},
            body=records_body(found, self._store_host()),
        )

    async def view(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        offset = HeaderFields(request).int("offset")
        try:
            message = self._broker.queries.at_commit_log_offset(offset)
        except MessageNotFoundError:
            return request.reply(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {offset}")
        return request.reply(ResponseCode.SUCCESS, body=record_of(message, self._store_host()))
