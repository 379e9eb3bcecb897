"""Exceptions of the broker core: one hierarchy, rooted at `CoreError`, for everything a caller of the public API
(`core/__init__.py`) can receive, so a front door catches one base class.

    CoreError                      (BrokerError is the same class, under its older name)
    ├── TopicNotFoundError         LookupError   the topic does not exist and may not be created (TOPIC_NOT_EXIST)
    ├── TopicConfigError           ValueError    a topic name or configuration breaks a rule (ILLEGAL_TOPIC)
    ├── GroupNotFoundError         LookupError   the consumer group does not exist (SUBSCRIPTION_GROUP_NOT_EXIST)
    ├── GroupConfigError           ValueError    a group name or subscription group configuration breaks a rule
    ├── InvalidOffsetError         ValueError    a consumer offset or queue id out of range
    ├── NoPermissionError                        the topic's perm forbids the write or read (NO_PERMISSION)
    ├── IllegalMessageError        ValueError    a message that cannot be stored as it is (MESSAGE_ILLEGAL)
    │   └── PayloadTooLargeError                 over max_message_size, or a batch over 4 MiB (MESSAGE_BODY_TOO_LARGE)
    ├── ServiceNotAvailableError                 the store refuses writes: disk full, failed fsync, store closed
    │                                            (SERVICE_NOT_AVAILABLE); reads keep working, retry later
    ├── StorageError                             any other failure of the message store (locked by another process,
    │                                            a corrupt file); the message names the file
    ├── RequestTimeoutError        TimeoutError  a send, retries included, not answered within send_msg_timeout_ms
    │                                            (ACCESS_BROKER_TIMEOUT, "sendDefaultImpl call timeout"): the
    │                                            message may or may not be stored; look it up by its UNIQ_KEY
    ├── IllegalArgumentError       ValueError    a client API call with an argument out of range or inconsistent
    ├── MessageNotFoundError       LookupError   no stored message has the id asked for (removed by retention, or
    │                                            never there); queries by key answer an empty list instead
    ├── RecallError                ValueError    a recall handle that cannot be honoured: malformed, another topic's
    │                                            or broker's, or its message due already (ILLEGAL_OPERATION)
    ├── ConfigFileError                          a JSON config file cannot be used (path, line, column)
    ├── ConsumersOnlineError                     an admin change a live consumer of the group would undo (a reset
    │                                            of offsets while push consumers hold them in memory): stop them
    ├── FilterExpressionError      ValueError    core.filter: a TAG or SQL92 expression that does not parse
    ├── UnsupportedExpressionTypeError ValueError core.filter: neither TAG nor SQL92
    └── PopError                                 core.pop.errors: pop consumption
        ├── PopRequestError        ValueError    a pop, ack or change of invisible time out of range
        └── ReceiptHandleError     ValueError    a receipt handle that cannot be honoured

The names in parentheses are the RocketMQ response codes a RocketMQ user knows for the same refusal. Errors that
are also ValueError or LookupError say "your input is wrong" or "no such thing": a front door can answer those
to its client (MQTT reason code 0x90, HTTP 400/404) and treat the others as the server's failure.

The store (core/store) keeps its own exceptions, because it knows nothing above it. The broker translates them at
its boundary, as RocketMQ's broker turns a PutMessageStatus into a response code: `from_store_error` gives the
core error for a store error, with the same message, and the caller raises it `from` the store error, which stays
available as `__cause__`.

Messages say what went wrong, where, and what to do about it.
"""

from __future__ import annotations

import enum
from pathlib import Path

from core.store.errors import (
    HAPortError,
    InvalidMessageError,
    InvalidTopicError,
    MessageTooLargeError,
    StoreError,
    StoreNotWritableError,
)


class CoreError(Exception):
    """Base class of every error the broker core raises through its public API, store errors included."""


# One class under two names, not a subclass: front doors written against BrokerError meant "whatever the core
# refuses", and a separate subclass would have left them missing the store's refusals (a full disk) now that those
# are core errors too. New code names CoreError.
BrokerError = CoreError


class TopicNotFoundError(CoreError, LookupError):
    """The topic does not exist and may not be created on the fly; `topic` names it, for a front door that knows
    how its users name topics (an MQTT topic maps to a core topic of another name)."""

    def __init__(self, message: str, topic: str | None = None) -> None:
        super().__init__(message)
        self.topic = topic


class TopicConfigError(CoreError, ValueError):
    """A topic name or configuration breaks a rule (name, queue counts, permissions, attributes)."""


class GroupNotFoundError(CoreError, LookupError):
    """The consumer group does not exist and may not be created on the fly."""


class GroupConfigError(CoreError, ValueError):
    """A consumer group name or subscription group configuration breaks a rule."""


class InvalidOffsetError(CoreError, ValueError):
    """A consumer offset or queue id is out of range."""


class NoPermissionError(CoreError):
    """The topic's permissions do not allow the operation (a write to a topic without WRITE, a read without READ)."""


class IllegalMessageError(CoreError, ValueError):
    """A message that cannot be stored as it is: bad properties or body, a queue the topic does not have, a batch
    that mixes queues or holds delayed messages, a light queue name without the %LMQ% prefix."""


class PayloadTooLargeError(IllegalMessageError):
    """A message over the store's max_message_size (body and properties), or a batch over 4 MiB."""


class ServiceNotAvailableError(CoreError):
    """The store refuses writes for now (disk past disk_refuse_ratio, a failed fdatasync, the store closed); nothing
    was written. Reads keep working; the message says why and what frees it."""


class StorageError(CoreError):
    """The message store failed otherwise: it is locked by another process, or a file of it cannot be used."""


class HAPortUnavailableError(StorageError):
    """A master's HA port cannot be listened on (in use, not allowed): the store did not open."""

    def __init__(self, message: str, host: str = "", port: int = 0, reason: str = "") -> None:
        super().__init__(message)
        self.host = host
        self.port = port
        self.reason = reason


class RequestTimeoutError(CoreError, TimeoutError):
    """A producer's send, retries included, took longer than its send_msg_timeout_ms (RocketMQ's client gives up with
    "sendDefaultImpl call timeout"; its code for a broker not answering in time is ACCESS_BROKER_TIMEOUT, which the
    gRPC endpoint answers as PROXY_TIMEOUT). The message may or may not have been stored: the message says which
    attempt was cut off and names the message's UNIQ_KEY, by which it can be looked up before it is sent again."""


class IllegalArgumentError(CoreError, ValueError):
    """A call of the client API with an argument out of range or inconsistent with the others."""


class MessageNotFoundError(CoreError, LookupError):
    """No stored message answers to the id asked for: an offset message id naming no record here (another broker's,
    or a record retention removed), or a unique id the index does not know in the topics searched."""


class RecallProblem(enum.Enum):
    """Why a recall was refused (core.scheduling.recalls); a front door maps these to its own status codes."""

    MALFORMED = "MALFORMED"  # not a recall handle (RocketMQ: "recall handle is invalid")
    OTHER_TOPIC = "OTHER_TOPIC"  # the handle names another topic than the request ("topic not match")
    OTHER_BROKER = "OTHER_BROKER"  # issued by another broker
    NOT_PENDING = "NOT_PENDING"  # its message is due already, or its time is out of range ("timestamp invalid")


class RecallError(CoreError, ValueError):
    """A recall (Broker.recall_message) refused: nothing was recalled. `problem` says why, the message says which
    handle and what to do."""

    def __init__(self, problem: RecallProblem, message: str) -> None:
        super().__init__(message)
        self.problem = problem


class ConsumersOnlineError(CoreError):
    """An admin change that the group's live consumers would undo, such as resetting offsets that its push consumers
    hold in memory and commit again; the message names the consumers to stop first (as Kafka's offset reset asks
    for an inactive group)."""


class ConfigFileError(CoreError):
    """A JSON config file cannot be used. Carries the path and, for syntax errors, the line and column.

    The broker refuses to start on such a file rather than starting empty: an empty topic or offset table
    would silently lose every topic and make consumers start over.
    """

    def __init__(
        self,
        path: Path | str,
        reason: str,
        line: int | None = None,
        column: int | None = None,
        hint: str = "fix or delete the file",
    ) -> None:
        where = f" line {line} column {column}" if line is not None and column is not None else ""
        super().__init__(f"{path}{where}: {reason}; {hint}")
        self.path = Path(path)
        self.reason = reason
        self.line = line
        self.column = column


def from_store_error(error: StoreError) -> CoreError:
    """The core error for an error of the store, with the same message and `error` as its `__cause__`: raise it
    `from error`. The cause is set here too, because compiled callers (mypyc) ignore `raise ... from`."""
    core_error: CoreError
    if isinstance(error, StoreNotWritableError):
        core_error = ServiceNotAvailableError(str(error))
    elif isinstance(error, MessageTooLargeError):
        core_error = PayloadTooLargeError(str(error))
    elif isinstance(error, InvalidMessageError):
        core_error = IllegalMessageError(str(error))
    elif isinstance(error, InvalidTopicError):
        core_error = TopicConfigError(str(error))
    elif isinstance(error, HAPortError):
        core_error = HAPortUnavailableError(str(error), error.host, error.port, error.reason)
    else:
        core_error = StorageError(str(error))
    core_error.__cause__ = error
    return core_error
