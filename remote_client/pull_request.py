"""A pull as a remoting request (PULL_MESSAGE 11) and its reply as the core's PullResult. Pure code.

SUCCESS                  FOUND, the records of the body as StoredMessages (compressed bodies inflated, as
                         core.PullConsumer gives them)
PULL_NOT_FOUND 19        NO_NEW_MSG
PULL_RETRY_IMMEDIATELY 20  NO_MATCHED_MSG: the filter passed over what it read; nextBeginOffset is past it
PULL_OFFSET_MOVED 21     OFFSET_ILLEGAL; nextBeginOffset is where to go on
anything else            the refusal's core error (replies.py)
"""

from __future__ import annotations

from core import MessageQueue, PullResult, PullStatus
from remote_client.records import stored_messages
from remote_client.replies import refusal
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.request_headers import PULL_COMMIT_OFFSET, PULL_SUBSCRIPTION, PULL_SUSPEND

_STATUSES: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


def pull_request(
    group: str,
    queue: MessageQueue,
    offset: int,
    max_nums: int,
    expression: str,
    expression_type: str,
    long_poll_ms: int,
    commit_offset: int = -1,
) -> RemotingCommand:
    sys_flag = PULL_SUBSCRIPTION
    if long_poll_ms > 0:
        sys_flag |= PULL_SUSPEND
    if commit_offset >= 0:
        sys_flag |= PULL_COMMIT_OFFSET
    fields = {
        "consumerGroup": group,
        "topic": queue.topic,
        "queueId": str(queue.queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": str(max_nums),
        "sysFlag": str(sys_flag),
        "commitOffset": str(max(commit_offset, 0)),
        "suspendTimeoutMillis": str(max(long_poll_ms, 0)),
        "subscription": expression,
        "subVersion": "0",
        "expressionType": expression_type,
    }
    return RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=fields)


def pull_result(reply: RemotingCommand, where: str) -> PullResult:
    status = _STATUSES.get(reply.code)
    if status is None:
        raise refusal(reply, where)
    ext = reply.ext_fields
    messages = stored_messages(reply.body) if status is PullStatus.FOUND else []
    return PullResult(
        status, messages, int(ext.get("nextBeginOffset", "0")), int(ext.get("minOffset", "0")),
        int(ext.get("maxOffset", "0")),
    )  # fmt: skip
