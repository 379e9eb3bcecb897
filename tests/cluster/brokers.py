"""Asking one broker of a cluster directly over remoting, as mqadmin does (the tests compare a master with its
slave): what a queue holds, a group's committed offset, a topic's presence, the broker's HA status."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from core import MessageQueue, PullStatus, StoredMessage
from remote_client.pull_request import pull_request, pull_result
from remote_client.records import stored_messages
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.java_json import loads

TIMEOUT_S = 10.0


def ask(address: str, code: RequestCode, **fields: object) -> RemotingCommand:
    async def run() -> RemotingCommand:
        client = RemotingClient()
        try:
            command = RemotingCommand(code, ext_fields={key: str(value) for key, value in fields.items()})
            return await client.invoke(address, command, TIMEOUT_S)
        finally:
            await client.close()

    return asyncio.run(run())


def queue_messages(address: str, topic: str, queue_id: int, group: str = "replica_check") -> list[StoredMessage]:
    """Every message of one queue of the broker at `address`, from its first offset."""

    async def run() -> list[StoredMessage]:
        client = RemotingClient()
        messages: list[StoredMessage] = []
        try:
            offset = 0
            while True:
                request = pull_request(group, MessageQueue(topic, "", queue_id), offset, 32, "*", "TAG", 0)
                reply = await client.invoke(address, request, TIMEOUT_S)
                result = pull_result(reply, address)
                if result.status is PullStatus.OFFSET_ILLEGAL and offset < result.min_offset:
                    offset = result.min_offset
                    continue
                if result.status is not PullStatus.FOUND:
                    # A slave whose master lives sends a reader at the queue's end to its master (retry, no move).
                    at_end = result.status is PullStatus.NO_MATCHED_MSG and result.next_begin_offset == offset
                    assert result.status is PullStatus.NO_NEW_MSG or at_end, (address, topic, queue_id, offset,
                                                                               result.status)  # fmt: skip
                    return messages
                messages += result.messages
                offset = result.next_begin_offset
        finally:
            await client.close()

    return asyncio.run(run())


def find_by_id(address: str, topic: str, unique_id: str) -> list[StoredMessage]:
    """The messages of `topic` whose unique id (UNIQ_KEY, a producer's msgId) is `unique_id`, by the broker's index
    (QUERY_MESSAGE with _UNIQUE_KEY_QUERY, as mqadmin queryMsgById does)."""
    reply = ask(address, RequestCode.QUERY_MESSAGE, topic=topic, key=unique_id, maxNum=32, beginTimestamp=0,
                endTimestamp=2**62, _UNIQUE_KEY_QUERY="true")  # fmt: skip
    if reply.code == ResponseCode.QUERY_NOT_FOUND:
        return []
    assert reply.code == ResponseCode.SUCCESS, (reply.code, reply.remark)
    return stored_messages(reply.body)


def committed(address: str, group: str, topic: str, queue_id: int) -> int:
    reply = ask(address, RequestCode.QUERY_CONSUMER_OFFSET, consumerGroup=group, topic=topic, queueId=queue_id,
                setZeroIfNotFound="false")  # fmt: skip
    return int(reply.ext_fields["offset"]) if reply.code == ResponseCode.SUCCESS else -1


def has_topic(address: str, topic: str) -> bool:
    return ask(address, RequestCode.GET_TOPIC_CONFIG, topic=topic).code == ResponseCode.SUCCESS


def wait_topics(address: str, *topics: str, timeout_s: float = 30.0) -> None:
    """Until the broker at `address` knows every topic (a slave copies its master's every 10 s)."""
    deadline = time.monotonic() + timeout_s
    while not all(has_topic(address, topic) for topic in topics):
        assert time.monotonic() < deadline, f"{topics} not on {address} within {timeout_s} s"
        time.sleep(0.5)


def ha_status(address: str) -> dict[str, Any]:
    reply = ask(address, RequestCode.GET_BROKER_HA_STATUS)
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    status: dict[str, Any] = loads(reply.body)
    return status


def runtime_info(address: str) -> dict[str, str]:
    reply = ask(address, RequestCode.GET_BROKER_RUNTIME_INFO)
    table: dict[str, str] = loads(reply.body)["table"]
    return table
