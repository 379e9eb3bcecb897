"""What consumers ask besides pulls and offsets: CONSUMER_SEND_MSG_BACK 36 (a message they failed to consume) and
LOCK_BATCH_MQ 41 / UNLOCK_BATCH_MQ 42 (orderly consumers' queue locks), after RocketMQ's SendMessageProcessor and
AdminBrokerProcessor.

Send-back names the message by its commit-log offset (`offset`; the C++ client sends only that, `group` and
`delayLevel`): it goes to the group's retry topic with the delay level (0: the broker's choice, 3 + reconsume times;
negative: the dead-letter topic at once), or to the dead-letter topic past maxReconsumeTimes (default: the group's
retry_max_times), through core.send_back. A copy that cannot be stored is refused, and the client keeps the message.

Locks: the body names consumerGroup, clientId and mqSet (topic, brokerName, queueId each); the reply's lockOKMQSet
holds the queues the client now holds (RocketMQ's LockBatchResponseBody). Locks expire unless renewed (the core's
queue_lock_expire_s, RocketMQ's 60 s).
"""

from __future__ import annotations

import json
from typing import Any

from core import Broker, MessageNotFoundError, MessageQueue, send_back
from remoting.channel import Channel
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingRequestError
from remoting.request_headers import HeaderFields


class ConsumerRequests:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def send_back(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        fields = HeaderFields(request)
        offset = fields.int("offset")
        try:
            message = self._broker.queries.at_commit_log_offset(offset)
        except MessageNotFoundError as exc:
            return request.reply(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {offset}: {exc}")
        max_times = fields.int("maxReconsumeTimes", -1)
        await send_back(
            self._broker,
            message,
            fields.text("group"),
            delay_level=fields.int("delayLevel", 0),
            max_reconsume_times=None if max_times < 0 else max_times,
        )
        return request.reply(ResponseCode.SUCCESS)

    async def lock(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group, client_id, queues = _lock_body(request)
        held = self._broker.queue_locks.lock(group, client_id, queues)
        body = {"lockOKMQSet": [_queue_json(queue) for queue in sorted(held)]}
        return request.reply(ResponseCode.SUCCESS, body=json.dumps(body).encode())

    async def unlock(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        group, client_id, queues = _lock_body(request)
        self._broker.queue_locks.unlock(group, client_id, queues)
        return request.reply(ResponseCode.SUCCESS)


def _queue_json(queue: MessageQueue) -> dict[str, Any]:
    return {"topic": queue.topic, "brokerName": queue.broker_name, "queueId": queue.queue_id}


def _lock_body(request: RemotingCommand) -> tuple[str, str, list[MessageQueue]]:
    try:
        data = json.loads(request.body)
        queues = [MessageQueue(str(q["topic"]), str(q["brokerName"]), int(q["queueId"])) for q in data["mqSet"]]
        return str(data["consumerGroup"]), str(data["clientId"]), queues
    except (ValueError, TypeError, KeyError) as exc:
        raise RemotingRequestError(
            f"request code {request.code}: the body is not a LockBatchRequestBody ({type(exc).__name__}: {exc})"
        ) from None
