"""A broker's or NameServer's refusal as the core's error, so that a remote call fails as the same call in process
does: the response code names the kind (the codes broker_remoting/refusals.py answers the core's errors with), and
an mqgate broker also names the core's error class in the reply's `coreError` field, which picks the exact class
(PayloadTooLargeError rather than IllegalMessageError). The reply's remark is the message. A connection that fails or
a reply that does not come is ServiceNotAvailableError or RequestTimeoutError, naming the broker.
"""

from __future__ import annotations

import enum

import core
from core import (
    BrokerError,
    CoreError,
    FilterExpressionError,
    GroupNotFoundError,
    IllegalMessageError,
    NoPermissionError,
    RecallError,
    RecallProblem,
    ReceiptHandleError,
    ReceiptHandleProblem,
    RequestTimeoutError,
    ServiceNotAvailableError,
    TopicNotFoundError,
)
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand

# The fields an mqgate broker adds to a refusal: the core error's class name, and the reason of an error that has
# one (broker_remoting/refusals.py).
CORE_ERROR_FIELD = "coreError"
CORE_PROBLEM_FIELD = "coreProblem"
# Errors built from (problem, message).
_PROBLEMS: dict[type[CoreError], type[enum.Enum]] = {
    ReceiptHandleError: ReceiptHandleProblem,
    RecallError: RecallProblem,
}

_BY_CODE: dict[int, type[CoreError]] = {
    ResponseCode.TOPIC_NOT_EXIST: TopicNotFoundError,
    ResponseCode.NO_PERMISSION: NoPermissionError,
    ResponseCode.MESSAGE_ILLEGAL: IllegalMessageError,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: FilterExpressionError,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: GroupNotFoundError,
    ResponseCode.SERVICE_NOT_AVAILABLE: ServiceNotAvailableError,
    ResponseCode.SYSTEM_BUSY: RequestTimeoutError,
}


def refusal(reply: RemotingCommand, where: str) -> CoreError:
    """The core error for a reply that is not SUCCESS; `where` names the broker or NameServer for a message that
    does not come from mqgate's core (a Java broker's remark)."""
    named = reply.ext_fields.get(CORE_ERROR_FIELD)
    kind = getattr(core, named, None) if named else None
    message = reply.remark or f"{where} answered code {reply.code}"
    if not (isinstance(kind, type) and issubclass(kind, CoreError)):
        kind = _BY_CODE.get(reply.code, BrokerError)
    problem = _PROBLEMS.get(kind)
    named_problem = reply.ext_fields.get(CORE_PROBLEM_FIELD, "")
    if problem is not None and named_problem in problem.__members__:
        return kind(problem[named_problem], message)
    try:
        return kind(message)
    except TypeError:
        # A class whose constructor takes its parts (FilterExpressionError: kind, expression, position, reason):
        # the same class, with the broker's whole message.
        error = kind.__new__(kind)
        Exception.__init__(error, message)
        return error


def unreachable(where: str, error: BaseException) -> ServiceNotAvailableError:
    return ServiceNotAvailableError(f"{where} cannot be reached: {error}")


def timed_out(where: str, timeout_s: float) -> RequestTimeoutError:
    return RequestTimeoutError(f"{where} did not answer within {timeout_s:g} s")


def check(reply: RemotingCommand, where: str) -> RemotingCommand:
    """The reply if it is SUCCESS; else raise its core error."""
    if reply.code != ResponseCode.SUCCESS:
        raise refusal(reply, where)
    return reply
