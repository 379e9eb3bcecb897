"""The remoting answer to every refusal of the core: a response code RocketMQ 4 clients know and the core's message
as the remark (RocketMQ's processors answer so), never a traceback; and the core error's class name in the reply's
`coreError` field, for mqgate's remote client.

    core error                                  response code
    TopicNotFoundError                          TOPIC_NOT_EXIST 17
    NoPermissionError                           NO_PERMISSION 16
    IllegalMessageError, PayloadTooLargeError   MESSAGE_ILLEGAL 13
    FilterExpressionError and                   SUBSCRIPTION_PARSE_FAILED 23
      UnsupportedExpressionTypeError
    GroupNotFoundError                          SUBSCRIPTION_GROUP_NOT_EXIST 26
    ServiceNotAvailableError                    SERVICE_NOT_AVAILABLE 14 (a full disk: the client tries elsewhere)
    RequestTimeoutError                         SYSTEM_BUSY 2 (the client may retry)
    any other CoreError                         SYSTEM_ERROR 1

`serving` wraps a handler so: the remoting server answers the RemotingRequestError it raises (remoting/server.py).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from core import (
    CoreError,
    FilterExpressionError,
    GroupNotFoundError,
    IllegalMessageError,
    NoPermissionError,
    RequestTimeoutError,
    ServiceNotAvailableError,
    TopicNotFoundError,
    UnsupportedExpressionTypeError,
)
from remoting.channel import Channel, RequestHandler
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingRequestError

_CODES: tuple[tuple[type[Exception], int], ...] = (
    (TopicNotFoundError, ResponseCode.TOPIC_NOT_EXIST),
    (NoPermissionError, ResponseCode.NO_PERMISSION),
    (IllegalMessageError, ResponseCode.MESSAGE_ILLEGAL),
    (FilterExpressionError, ResponseCode.SUBSCRIPTION_PARSE_FAILED),
    (UnsupportedExpressionTypeError, ResponseCode.SUBSCRIPTION_PARSE_FAILED),
    (GroupNotFoundError, ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST),
    (ServiceNotAvailableError, ResponseCode.SERVICE_NOT_AVAILABLE),
    (RequestTimeoutError, ResponseCode.SYSTEM_BUSY),
)


def code_of(error: CoreError) -> int:
    for kind, code in _CODES:
        if isinstance(error, kind):
            return code
    return ResponseCode.SYSTEM_ERROR


def refused(error: CoreError) -> RemotingRequestError:
    # The core error's class too, in a field RocketMQ's clients ignore: mqgate's remote client raises that class,
    # so a call fails over remoting as it fails in process (remote_client/replies.py).
    fields = {"coreError": type(error).__name__}
    problem = getattr(error, "problem", None)  # ReceiptHandleError's and RecallError's reason, an enum
    if problem is not None and hasattr(problem, "name"):
        fields["coreProblem"] = problem.name
    return RemotingRequestError(str(error), code_of(error), fields)


def serving(
    handler: Callable[[Channel, RemotingCommand], Awaitable[RemotingCommand | None]],
    check: Callable[[RemotingCommand], None] | None = None,
) -> RequestHandler:
    """`handler`, with the core's refusals answered in the protocol's words, after `check` (access control), which
    raises RemotingRequestError for a request that may not be served."""

    async def serve(channel: Channel, request: RemotingCommand) -> RemotingCommand | None:
        if check is not None:
            check(request)
        try:
            return await handler(channel, request)
        except CoreError as exc:
            raise refused(exc) from exc

    return serve
