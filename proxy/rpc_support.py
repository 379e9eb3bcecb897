"""What every RPC of the endpoint shares: the wrapper that answers a refusal with its Status, the checks of names and
access, the compiled filters, and the state the RPC groups (proxy.service, proxy.consumer_rpcs,
proxy.offset_rpcs) work on.

What each RPC needs of access control (acl.access_control; ServiceState.check asks it), after the checks of
RocketMQ's proxy for gRPC (PlainAccessResource.parse in ACL 1.0, DefaultAuthorizationContextBuilder in ACL 2.0);
every RPC also needs the call authenticated (proxy.signature):

    RPC                                   topic                         group
    SendMessage                           PUB, each distinct topic      -
    EndTransaction, RecallMessage         PUB                           -
    QueryRoute                            ANY (PUB or SUB)              -
    ReceiveMessage, AckMessage,           SUB                           SUB
      ChangeInvisibleDuration,
      ForwardMessageToDeadLetterQueue,
      QueryAssignment
    PullMessage, GetOffset, UpdateOffset, SUB                           SUB
      SyncLiteSubscription
    QueryOffset                           SUB                           - (the request names none)
    Heartbeat                             -                             SUB when the client is a consumer
    NotifyClientTermination               -                             SUB when a group is given
    Telemetry, Settings command           PUB each publishing topic,    SUB the subscription's group
                                          SUB each subscribed topic
    Telemetry, other commands             -                             -

Where RocketMQ differs, and why the table is as it is:
- SendMessage: ACL 1.0 refuses a batch whose messages name different topics, ACL 2.0 checks the first message's
  topic only; checking every distinct topic refuses what either would refuse and lets no topic through unchecked.
- ChangeInvisibleDuration: ACL 2.0 checks the group only; ACL 1.0 and this table check the topic too (the request
  names it, and the call delays that topic's message).
- PullMessage, the three offset RPCs and SyncLiteSubscription: neither RocketMQ builder lists them, so RocketMQ
  checks nothing but the signature for them over gRPC. They are checked here as their remoting counterparts are
  (PULL_MESSAGE, QUERY_CONSUMER_OFFSET, UPDATE_CONSUMER_OFFSET: topic SUB and group SUB); reading offsets by time
  or queue end (QueryOffset) has no group, and needs topic SUB where RocketMQ 2.0 would ask for GET, which the
  ACL 1.0 file format cannot grant.
- RecallMessage came after ACL 1.0; ACL 2.0 checks topic PUB, as here.
- Heartbeat: a consumer is a push, simple or pull consumer (ACL 2.0). RocketMQ refuses a consumer's heartbeat that
  names no group ("Consumer heartbeat doesn't have group"), and a Settings command with neither publishing nor
  subscription; those refusals are the endpoint's (bad requests), not access control's.
- Names are passed as the core stores them (were x-mq-namespace ever mapped onto names, entries would name mapped
  names).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc

from acl.access_control import AccessControl, Action, ResourceKind
from core import Broker, CoreError, ExpressionType, MessageFilter, PopService, build_filter
from proxy.signature import authenticate
from proxy.status_codes import RequestError, ok, status, status_of
from proxy.stubs import Code, FilterType, definition_pb2

log = logging.getLogger("proxy.service")

OK = Code.OK
# Subscriptions compiled, kept by (type, expression): a consumer sends the same one with every receive.
MAX_CACHED_FILTERS = 4096


def unary(response_type: type[Any]) -> Callable[[Callable[..., Awaitable[Any]]], Callable[..., Awaitable[Any]]]:
    """Answer whatever an RPC raises with a `response_type` carrying the refusal's Status."""

    def wrap(method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        @functools.wraps(method)
        async def handler(self: Any, request: Any, context: grpc.aio.ServicerContext) -> Any:
            try:
                return await method(self, request, context)
            except Exception as exc:  # every refusal is an answer (module docstring)
                return response_type(status=refusal(method.__name__, exc))

        return handler

    return wrap


def refusal(rpc: str, error: Exception) -> definition_pb2.Status:
    answer = status_of(error)
    if answer.code == Code.INTERNAL_SERVER_ERROR and not isinstance(error, CoreError):
        log.exception("gRPC %s failed", rpc)
    else:
        log.debug("gRPC %s refused: %s %s", rpc, Code.Name(answer.code), answer.message)
    return answer


def resource_name(resource: definition_pb2.Resource, what: str) -> str:
    if resource.resource_namespace:
        raise RequestError(
            Code.BAD_REQUEST,
            f"{what} {resource.name!r}: namespace {resource.resource_namespace!r} given, but mqgate has no namespaces"
            " yet; leave ClientConfiguration's namespace empty",
        )
    if not resource.name:
        code = Code.ILLEGAL_TOPIC if what == "topic" else Code.ILLEGAL_CONSUMER_GROUP
        raise RequestError(code, f"the request names no {what}")
    return resource.name


def combined(codes: list[int]) -> definition_pb2.Status:
    """One status for several entries: theirs when they agree, MULTIPLE_RESULTS when they do not."""
    distinct = set(codes)
    if len(distinct) == 1:
        code = distinct.pop()
        return ok() if code == OK else status(code, Code.Name(code))
    return status(Code.MULTIPLE_RESULTS, "entries have different results; see each entry's status")


def peer_host(context: grpc.aio.ServicerContext) -> str:
    """The client's IP address, from gRPC's peer ("ipv4:127.0.0.1:5555", "ipv6:[::1]:5555")."""
    peer = context.peer() or ""
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0]
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")
    return "127.0.0.1"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class ServiceState:
    """What every group of RPCs shares: the broker, the limits, access control, the pop service, the endpoint's own
    address and the compiled filters. One per endpoint, handed to each group (proxy/service.py)."""

    def __init__(self, broker: Broker, *, max_body_bytes: int, access: AccessControl | None = None) -> None:
        self.broker = broker
        self.max_body_bytes = max_body_bytes
        self.access = access
        self.pop = PopService.of(broker)
        # Where clients reach us when a request does not say (set by proxy.server once it listens).
        self.own_endpoints = definition_pb2.Endpoints()
        self._filters: dict[tuple[str, str], MessageFilter | None] = {}

    def check(self, context: grpc.aio.ServicerContext, *needs: tuple[ResourceKind, str, Action]) -> None:
        """Authenticate the call (proxy.signature) and check what it needs (the table above), when access control is
        on."""
        access = self.access
        if access is not None:
            access_key = authenticate(context.invocation_metadata() or (), access.secret_keys, access.source)
            for kind, name, action in needs:
                access.check(access_key, kind, name, action)

    def endpoints(self, given: definition_pb2.Endpoints) -> definition_pb2.Endpoints:
        return given if given.addresses else self.own_endpoints

    def filter(self, expression: definition_pb2.FilterExpression) -> MessageFilter | None:
        kind = ExpressionType.SQL92 if expression.type == FilterType.SQL else ExpressionType.TAG
        text = expression.expression or "*"
        key = (kind, text)
        if key in self._filters:
            return self._filters[key]
        compiled = None if kind == ExpressionType.TAG and text.strip() == "*" else build_filter(kind, text)
        if len(self._filters) >= MAX_CACHED_FILTERS:
            self._filters.clear()
        self._filters[key] = compiled
        return compiled
