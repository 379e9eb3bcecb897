"""RocketMQ's ExpressionType (TAG or SQL92) and the filter each one builds from a subscription."""

from __future__ import annotations

from enum import StrEnum

from core.filter.errors import UnsupportedExpressionTypeError
from core.filter.message_filter import MessageFilter
from core.filter.sql92 import Sql92Filter
from core.filter.tag_expression import TagFilter


class ExpressionType(StrEnum):
    TAG = "TAG"
    SQL92 = "SQL92"


def build_filter(expression_type: str | None, expression: str | None) -> MessageFilter:
    """The filter of a subscription. As in RocketMQ, a missing or empty type means TAG; an SQL92 expression must
    not be empty. Raises FilterExpressionError for a malformed expression, UnsupportedExpressionTypeError for a
    type other than TAG or SQL92 (in any case)."""
    kind = (expression_type or ExpressionType.TAG).upper()
    if kind == ExpressionType.TAG:
        return TagFilter.parse(expression)
    if kind == ExpressionType.SQL92:
        return Sql92Filter.compile(expression or "")
    raise UnsupportedExpressionTypeError(expression_type or "")


class FilterCache:
    """Each subscription's filter compiled once (a pull consumer is asked for the same few again and again)."""

    __slots__ = ("_filters",)

    def __init__(self) -> None:
        self._filters: dict[tuple[str, str], MessageFilter] = {}

    def compile(self, expression: str = "*", expression_type: str = ExpressionType.TAG) -> MessageFilter:
        """The filter of a subscription, as `build_filter` makes it (and raises)."""
        key = (expression_type, expression)
        compiled = self._filters.get(key)
        if compiled is None:
            compiled = self._filters[key] = build_filter(expression_type, expression)
        return compiled
