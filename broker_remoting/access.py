"""RocketMQ's plain ACL on the broker's remoting port (RocketMQ 4's PlainAccessValidator; the same plain_acl.yml as
the gRPC endpoint, read by acl/).

Every request must be signed by an account of the file (the AccessKey and Signature extFields,
remoting/acl_signature.py); a request without credentials, with an unknown key or with a signature that does not
match is refused NO_PERMISSION 16, as Apache RocketMQ's broker answers, and so is one whose account lacks a
permission. What each code needs, after PlainAccessResource.parse (a group's permission is checked as its retry
topic's, `%RETRY%group`):

    SEND_MESSAGE 10, _V2 310, _BATCH 320   PUB on the topic (a send to a retry topic: SUB on its group)
    CONSUMER_SEND_MSG_BACK 36              SUB on the group
    PULL_MESSAGE 11, POP_MESSAGE 200050,   SUB on the topic and on the group
      ACK_MESSAGE 200051, CHANGE_MESSAGE_INVISIBLETIME 200053, NOTIFICATION 200054
    QUERY_MESSAGE 12, VIEW_MESSAGE_BY_ID 33  SUB on the topic (by id: none beyond the signature)
    HEART_BEAT 34                          SUB on each consumer group and each topic it subscribes
    UNREGISTER_CLIENT 35, GET_CONSUMER_LIST_BY_GROUP 38   SUB on the group
    QUERY_CONSUMER_OFFSET 14, UPDATE_ 15   SUB on the group and the topic
    UPDATE_AND_CREATE_TOPIC 17, DELETE_TOPIC_IN_BROKER 215, the subscription groups' 200 and 207, and
      INVOKE_BROKER_TO_RESET_OFFSET 222    an admin account
    any other code                         the signature only

Pure: `needs(request)` is the table; `AccessCheck.check` raises RemotingRequestError(NO_PERMISSION).
"""

from __future__ import annotations

import json

from acl.access_control import AccessControl, Action, ResourceKind
from acl.errors import AccessError
from core import RETRY_PREFIX
from remoting.acl_signature import SignatureRefused, verified_access_key
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingRequestError

Need = tuple[ResourceKind, str, Action]

# PlainPermissionManager's adminRequestCode: what changes the broker's tables.
ADMIN_CODES = frozenset(
    {
        RequestCode.UPDATE_AND_CREATE_TOPIC,
        RequestCode.DELETE_TOPIC_IN_BROKER,
        RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        RequestCode.DELETE_SUBSCRIPTIONGROUP,
        RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
    }
)
_V2_TOPIC, _V2_GROUP = "b", "a"


def _group(name: str) -> Need:
    return ResourceKind.GROUP, name, Action.SUB


def needs(request: RemotingCommand) -> list[Need]:
    """What `request` needs, besides its signature (an admin code's need is checked apart)."""
    ext = request.ext_fields
    code = request.code
    if code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
        topic = ext.get("topic", ext.get(_V2_TOPIC, ""))
        if topic.startswith(RETRY_PREFIX):
            return [_group(topic[len(RETRY_PREFIX) :])]
        return [(ResourceKind.TOPIC, topic, Action.PUB)]
    if code == RequestCode.CONSUMER_SEND_MSG_BACK:
        return [_group(ext.get("group", ""))]
    if code in (RequestCode.PULL_MESSAGE, RequestCode.POP_MESSAGE, RequestCode.ACK_MESSAGE,
                RequestCode.CHANGE_MESSAGE_INVISIBLETIME, RequestCode.NOTIFICATION):  # fmt: skip
        return [(ResourceKind.TOPIC, ext.get("topic", ""), Action.SUB), _group(ext.get("consumerGroup", ""))]
    if code == RequestCode.QUERY_MESSAGE:
        return [(ResourceKind.TOPIC, ext.get("topic", ""), Action.SUB)]
    if code in (RequestCode.UNREGISTER_CLIENT, RequestCode.GET_CONSUMER_LIST_BY_GROUP):
        group = ext.get("consumerGroup")
        return [_group(group)] if group else []
    if code in (RequestCode.QUERY_CONSUMER_OFFSET, RequestCode.UPDATE_CONSUMER_OFFSET):
        return [_group(ext.get("consumerGroup", "")), (ResourceKind.TOPIC, ext.get("topic", ""), Action.SUB)]
    if code == RequestCode.HEART_BEAT:
        return _heartbeat_needs(request.body)
    return []


def _heartbeat_needs(body: bytes) -> list[Need]:
    try:
        data = json.loads(body)
        found: list[Need] = []
        for consumer in data.get("consumerDataSet") or []:
            found.append(_group(str(consumer["groupName"])))
            for subscription in consumer.get("subscriptionDataSet") or []:
                topic = str(subscription["topic"])
                if not topic.startswith(RETRY_PREFIX):
                    found.append((ResourceKind.TOPIC, topic, Action.SUB))
        return found
    except (ValueError, TypeError, KeyError, AttributeError):
        return []  # the heartbeat handler refuses what it cannot read, naming what was wrong


class AccessCheck:
    def __init__(self, access: AccessControl) -> None:
        self._access = access

    def check(self, request: RemotingCommand) -> None:
        """Returns if the request may be served; raises RemotingRequestError(NO_PERMISSION) saying why not."""
        try:
            access_key = verified_access_key(request, self._access.secret_keys.get)
        except SignatureRefused as exc:
            raise _refused(str(exc)) from None
        if access_key is None:
            raise _refused(
                f"request code {request.code} carries no AccessKey: the broker checks every request against"
                f" {self._access.source}; give the client an account's access and secret key"
            )
        if request.code in ADMIN_CODES:
            account = self._access.accounts[access_key]
            if not account.admin:
                raise _refused(f"request code {request.code} needs an admin account; {access_key!r} is not one")
            return
        try:
            for kind, name, action in needs(request):
                self._access.check(access_key, kind, name, action)
        except AccessError as exc:
            raise _refused(str(exc)) from None


def _refused(message: str) -> RemotingRequestError:
    return RemotingRequestError(message, ResponseCode.NO_PERMISSION)
