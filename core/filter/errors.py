"""Exceptions of the message filters. Messages say what is wrong, where in the expression, and what to do."""

from __future__ import annotations

from core.errors import CoreError


class FilterExpressionError(CoreError, ValueError):
    """A subscription expression (TAG or SQL92) that cannot be parsed or makes no sense.

    `position` is the 0-based index in `expression` of the character or token at fault; for a missing piece it is
    where the piece was expected (the length of the expression if it ran out). A subscribe call surfaces the error
    unchanged, so the message is written for the client's user.
    """

    def __init__(self, kind: str, expression: str, position: int, reason: str) -> None:
        super().__init__(f"{kind} expression at position {position}: {reason}")
        self.kind = kind
        self.expression = expression
        self.position = position
        self.reason = reason


class UnsupportedExpressionTypeError(CoreError, ValueError):
    """A subscription names an expression type other than RocketMQ's TAG or SQL92."""

    def __init__(self, expression_type: str) -> None:
        super().__init__(f"expression type {expression_type!r} is not supported; use 'TAG' or 'SQL92'")
        self.expression_type = expression_type
