"""Broker-side message filters, as RocketMQ's: TAG expressions checked on consume-queue tag codes, and SQL92
conditions over message properties. `build_filter` turns a subscription's (type, expression) into either."""

from core.filter.errors import FilterExpressionError, UnsupportedExpressionTypeError
from core.filter.expression_type import ExpressionType, FilterCache, build_filter
from core.filter.message_filter import FilterableMessage, MessageFilter
from core.filter.sql92 import MAX_EXPRESSION_LENGTH, Sql92Filter
from core.filter.sql92_parser import MAX_NESTING_DEPTH
from core.filter.tag_expression import TagFilter

__all__ = [
    "MAX_EXPRESSION_LENGTH",
    "MAX_NESTING_DEPTH",
    "ExpressionType",
    "FilterCache",
    "FilterExpressionError",
    "FilterableMessage",
    "MessageFilter",
    "Sql92Filter",
    "TagFilter",
    "UnsupportedExpressionTypeError",
    "build_filter",
]
