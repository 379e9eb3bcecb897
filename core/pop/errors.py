"""Exceptions of pop consumption (core.pop.service): bad requests and receipt handles that cannot be honoured.

Messages say what is wrong, with which handle or argument, and what the consumer should do about it.
"""

from __future__ import annotations

import enum

from core.errors import CoreError


class PopError(CoreError):
    """Base class of the errors of pop consumption."""


class PopRequestError(PopError, ValueError):
    """A pop, ack or change of invisible time asked for something out of range (batch size, invisible time)."""


class ReceiptHandleProblem(enum.Enum):
    """Why a receipt handle was refused; a front door maps these to its own status codes."""

    MALFORMED = "MALFORMED"  # not a handle this broker writes
    OTHER_RUN = "OTHER_RUN"  # issued before a broker restart, or by another broker
    OTHER_GROUP = "OTHER_GROUP"  # issued to another consumer group
    SUPERSEDED = "SUPERSEDED"  # the message was delivered again, or its invisible time changed since
    ALREADY_ACKED = "ALREADY_ACKED"  # the message is done; only a change of invisible time reports this
    NOT_IN_FLIGHT = "NOT_IN_FLIGHT"  # no delivery of that message is known (offsets were reset meanwhile)


class ReceiptHandleError(PopError, ValueError):
    """A receipt handle that cannot be used to ack a message or change its invisible time."""

    def __init__(self, problem: ReceiptHandleProblem, message: str) -> None:
        super().__init__(message)
        self.problem = problem
