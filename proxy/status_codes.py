"""The protocol's answer to every refusal: a `Status` (code and message) in the response, as RocketMQ's proxy writes
it (ResponseBuilder.buildStatus), never a gRPC error and never a Python traceback.

`RequestError` is what the request mapping raises for a request it refuses itself (a blank tag, a delivery time
too far ahead); `status_of` turns it, an access refusal or any core error into the Status its client understands:

    error                                 code
    acl.errors.Unauthenticated            UNAUTHORIZED (no valid signature)
    acl.errors.Forbidden                  FORBIDDEN (the account lacks the permission)
    TopicNotFoundError                    TOPIC_NOT_FOUND
    GroupNotFoundError                    CONSUMER_GROUP_NOT_FOUND
    TopicConfigError                      ILLEGAL_TOPIC
    GroupConfigError                      ILLEGAL_CONSUMER_GROUP
    PayloadTooLargeError                  MESSAGE_BODY_TOO_LARGE
    IllegalMessageError                   BAD_REQUEST
    NoPermissionError                     FORBIDDEN
    FilterExpressionError and             ILLEGAL_FILTER_EXPRESSION
      UnsupportedExpressionTypeError
    ReceiptHandleError                    INVALID_RECEIPT_HANDLE
    PopRequestError                       BAD_REQUEST (ILLEGAL_INVISIBLE_TIME when about the invisible time)
    ServiceNotAvailableError              INTERNAL_SERVER_ERROR ("retry later", as the proxy answers a full disk)
    RequestTimeoutError                   PROXY_TIMEOUT
    IllegalArgumentError, InvalidOffset   BAD_REQUEST
    MessageNotFoundError                  MESSAGE_NOT_FOUND
    RecallError                           INTERNAL_SERVER_ERROR (as the proxy: its broker's ILLEGAL_OPERATION has
                                          no code of its own; the message says what was wrong with the handle)
    any other CoreError                   INTERNAL_SERVER_ERROR

Anything else raised while serving a request is a defect of ours: INTERNAL_SERVER_ERROR with the exception's type
and text, and the traceback goes to the log (proxy.service).
"""

from __future__ import annotations

from acl.errors import Forbidden, Unauthenticated
from core import (
    CoreError,
    FilterExpressionError,
    GroupConfigError,
    GroupNotFoundError,
    IllegalArgumentError,
    IllegalMessageError,
    InvalidOffsetError,
    MessageNotFoundError,
    NoPermissionError,
    PayloadTooLargeError,
    PopRequestError,
    RecallError,
    ReceiptHandleError,
    RequestTimeoutError,
    ServiceNotAvailableError,
    TopicConfigError,
    TopicNotFoundError,
    UnsupportedExpressionTypeError,
)
from proxy.errors import ProxyError
from proxy.stubs import Code, Status

# Most specific first: PayloadTooLargeError is an IllegalMessageError, ReceiptHandleError and PopRequestError are
# PopErrors.
_CODES: tuple[tuple[type[Exception], int], ...] = (
    (Unauthenticated, Code.UNAUTHORIZED),
    (Forbidden, Code.FORBIDDEN),
    (TopicNotFoundError, Code.TOPIC_NOT_FOUND),
    (GroupNotFoundError, Code.CONSUMER_GROUP_NOT_FOUND),
    (TopicConfigError, Code.ILLEGAL_TOPIC),
    (GroupConfigError, Code.ILLEGAL_CONSUMER_GROUP),
    (PayloadTooLargeError, Code.MESSAGE_BODY_TOO_LARGE),
    (IllegalMessageError, Code.BAD_REQUEST),
    (NoPermissionError, Code.FORBIDDEN),
    (FilterExpressionError, Code.ILLEGAL_FILTER_EXPRESSION),
    (UnsupportedExpressionTypeError, Code.ILLEGAL_FILTER_EXPRESSION),
    (ReceiptHandleError, Code.INVALID_RECEIPT_HANDLE),
    (ServiceNotAvailableError, Code.INTERNAL_SERVER_ERROR),
    (RequestTimeoutError, Code.PROXY_TIMEOUT),
    (IllegalArgumentError, Code.BAD_REQUEST),
    (InvalidOffsetError, Code.ILLEGAL_OFFSET),
    (MessageNotFoundError, Code.MESSAGE_NOT_FOUND),
    # RocketMQ's proxy answers every refused recall so (RecallMessageActivity, LocalMessageService.recallMessage).
    (RecallError, Code.INTERNAL_SERVER_ERROR),
)


class RequestError(ProxyError):
    """A request refused by the gRPC mapping itself, with the protocol's code for it."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_OK = Status(code=Code.OK, message="OK")


def ok() -> Status:
    """The OK status (one shared instance: a message field set from it copies it)."""
    return _OK


def status(code: int, message: str) -> Status:
    return Status(code=code, message=message)


def code_of(error: BaseException) -> int:
    """The protocol's code for a refusal (see the module docstring); INTERNAL_SERVER_ERROR when it is not one."""
    if isinstance(error, RequestError):
        return error.code
    if isinstance(error, PopRequestError):
        return Code.ILLEGAL_INVISIBLE_TIME if "invisible" in str(error) else Code.BAD_REQUEST
    for kind, code in _CODES:
        if isinstance(error, kind):
            return code
    return Code.INTERNAL_SERVER_ERROR


def status_of(error: BaseException) -> Status:
    """The Status answering a refusal: its code and its message, which says what was wrong and what to do."""
    code = code_of(error)
    message = str(error) or type(error).__name__
    if code == Code.INTERNAL_SERVER_ERROR and not isinstance(error, CoreError):
        message = f"internal error ({type(error).__name__}: {message}); the request was not carried out"
    return Status(code=code, message=message)
