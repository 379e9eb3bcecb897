"""SQL92 subscriptions: a condition over message properties, compiled once into a Python closure.

The subset is RocketMQ's (itself from JMS message selectors); the grammar is in `sql92_parser`. Keywords are
case-insensitive, property names are not.

Values
    A property name (`[A-Za-z_][A-Za-z0-9_.]*`) stands for that property's value, a string; a missing property
    is NULL. RocketMQ's system properties are properties too: `TAGS = 'TagA'` tests the tag.
    Literals: integers (`42`, `-5`), decimals (`3.14`, `.5`, `1e6`), strings in single quotes (`'it''s'`),
    TRUE, FALSE and NULL.

Three-valued logic
    Each condition is TRUE, FALSE or UNKNOWN. A message matches only when the whole expression is TRUE.
    UNKNOWN comes from NULL (a missing property) and from a property that should be a number and is not. As in
    SQL: `NOT UNKNOWN` is UNKNOWN; `FALSE AND UNKNOWN` is FALSE; `TRUE OR UNKNOWN` is TRUE; otherwise an AND or
    OR with an UNKNOWN operand is UNKNOWN. So for a message without `a`, both `a = 'x'` and `NOT (a = 'x')`
    (and `a <> 'x'`) are false; `a = 'x' OR b = 'y'` still matches when b is 'y'.

Numbers
    A string becomes a number when it is an ASCII decimal, optionally signed, with an optional fraction and
    exponent: '5', '-5', '+5', '5.0', '.5', '5.', '1e3'. Not ' 5', '1_000', '0x10', 'NaN', 'Infinity'. Integers
    stay exact integers; anything with '.' or an exponent is a float. `a > 5` for a = 'abc' is UNKNOWN.

Comparisons
    `=`, `<>`  against a number literal: numeric (`a = 5` is TRUE for '5', '5.0' and '+5'; UNKNOWN for 'abc').
               Against a string literal: exact, case-sensitive string equality (`a = '5'` is FALSE for '5.0').
               Against TRUE or FALSE: the property's text is 'true' or 'false' in any case (`flag = TRUE` is TRUE
               for 'True', FALSE for 'yes'). Two properties compare as strings. `<>` is `NOT =`.
               `= NULL` is refused: it is always UNKNOWN; write IS NULL.
    `<`, `<=`, `>`, `>=`, `[NOT] BETWEEN low AND high` (inclusive)
               numeric on both sides; string, TRUE, FALSE and NULL literals are refused, as by RocketMQ, and so is
               BETWEEN with literal bounds in the wrong order. `NOT BETWEEN` is `NOT (BETWEEN)`.
    `[NOT] IN (literal, ...)`
               `=` against each literal in turn: TRUE if one is TRUE, else UNKNOWN if one is UNKNOWN, else FALSE.
               `NOT IN` is `NOT (IN)`: UNKNOWN for a missing property.
    `IS NULL`, `IS NOT NULL`
               whether the property is missing; never UNKNOWN.
    `[NOT] CONTAINS | STARTSWITH | ENDSWITH 'text'`  (RocketMQ 5)
               case-sensitive substring tests; UNKNOWN for a missing property. As in RocketMQ an empty 'text'
               matches nothing, with or without NOT (here: UNKNOWN). Unlike RocketMQ, which makes `a NOT CONTAINS
               'x'` FALSE but `NOT (a CONTAINS 'x')` TRUE for a missing a, both are UNKNOWN here.
    Two literals compare by the same rules (`1 = 1.0` is TRUE, `'5' = 5` is TRUE, `'a' = 'A'` is FALSE).

Examples, for properties {'a': '10', 'color': 'red', 'flag': 'TRUE'}:
    a > 5 AND color IN ('red', 'blue')        TRUE
    a BETWEEN 1 AND 9 OR flag = TRUE          TRUE
    color > 5                                 FALSE (UNKNOWN: 'red' is not a number)
    NOT (size = 'L')                          FALSE (UNKNOWN: size is missing)
    size IS NULL AND color STARTSWITH 're'    TRUE
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from core.filter.errors import FilterExpressionError
from core.filter.message_filter import FilterableMessage
from core.filter.sql92_ast import (
    And,
    Between,
    BooleanConstant,
    CompareOp,
    Comparison,
    Condition,
    In,
    IsNull,
    Literal,
    LiteralValue,
    Not,
    Or,
    Property,
    StringMatch,
    StringOp,
    Value,
)
from core.filter.sql92_lexer import SQL92_KIND
from core.filter.sql92_parser import parse_sql92
from core.store.message import PROPERTY_TAGS

# Each subscription's expression is kept compiled for the life of the subscription on every broker that serves
# it. 4 KiB holds any hand-written selector (an IN list of 200 short tags fits) and caps what one client can make
# a broker hold. It also keeps integer literals below Python's 4300-digit limit on int() conversion.
MAX_EXPRESSION_LENGTH = 4096

# The result of a condition: True, False, or None for UNKNOWN.
Truth = bool | None
Evaluator = Callable[[Mapping[str, str]], Truth]
Number = int | float

_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")

_OPERATORS: dict[CompareOp, Callable[[Number, Number], bool]] = {
    CompareOp.EQ: operator.eq,
    CompareOp.NE: operator.ne,
    CompareOp.LT: operator.lt,
    CompareOp.LE: operator.le,
    CompareOp.GT: operator.gt,
    CompareOp.GE: operator.ge,
}
# `5 < a` is `a > 5`: lets every property-against-literal comparison take the fast path.
_MIRRORED = {
    CompareOp.EQ: CompareOp.EQ,
    CompareOp.NE: CompareOp.NE,
    CompareOp.LT: CompareOp.GT,
    CompareOp.LE: CompareOp.GE,
    CompareOp.GT: CompareOp.LT,
    CompareOp.GE: CompareOp.LE,
}
_STRING_TESTS: dict[StringOp, Callable[[str, str], bool]] = {
    StringOp.CONTAINS: lambda text, pattern: pattern in text,
    StringOp.STARTSWITH: str.startswith,
    StringOp.ENDSWITH: str.endswith,
}


@dataclass(frozen=True, slots=True)
class Sql92Filter:
    """A compiled SQL92 expression. Build it with `Sql92Filter.compile`; `matches` is safe to call from any
    thread and never raises for any properties."""

    expression: str
    tree: Condition = field(repr=False)
    _evaluate: Evaluator = field(repr=False, compare=False)

    @classmethod
    def compile(cls, expression: str) -> Sql92Filter:
        if len(expression) > MAX_EXPRESSION_LENGTH:
            raise FilterExpressionError(
                SQL92_KIND,
                expression,
                MAX_EXPRESSION_LENGTH,
                f"expression is {len(expression)} characters long; at most {MAX_EXPRESSION_LENGTH} are allowed, "
                "shorten it (long IN lists are often better as tags)",
            )
        tree = parse_sql92(expression)
        return cls(expression, tree, compile_condition(tree))

    def matches(self, properties: Mapping[str, str]) -> bool:
        """Whether the expression is TRUE for a message with these properties."""
        return self._evaluate(properties) is True

    def matches_code(self, code: int) -> bool:
        """Tag codes say nothing about properties: every entry must be read and checked."""
        return True

    def matches_message(self, message: FilterableMessage) -> bool:
        properties = message.properties
        tags = message.tags
        # RocketMQ offers the tag as the property TAGS; a stored message has it there already.
        if tags is not None and properties.get(PROPERTY_TAGS) != tags:
            properties = {**properties, PROPERTY_TAGS: tags}
        return self._evaluate(properties) is True


def _to_number(text: str) -> Number | None:
    """The number a property's text stands for, or None if it is not one (see the module docstring)."""
    try:
        if text.isdigit() and text.isascii():
            return int(text)
        if _NUMBER_TEXT.fullmatch(text) is None:
            return None
        if "." in text or "e" in text or "E" in text:
            return float(text)
        return int(text)
    except ValueError:
        # More digits than int() converts (sys.get_int_max_str_digits); float() takes any length.
        return float(text)


def compile_condition(node: Condition) -> Evaluator:
    """A closure evaluating `node` over a message's properties, returning True, False or None (UNKNOWN)."""
    if isinstance(node, Comparison):
        return _compile_comparison(node)
    if isinstance(node, Between):
        return _compile_between(node)
    if isinstance(node, In):
        return _compile_in(node)
    if isinstance(node, IsNull):
        return _compile_is_null(node)
    if isinstance(node, StringMatch):
        return _compile_string_match(node)
    if isinstance(node, BooleanConstant):
        return _constant(node.value)
    if isinstance(node, Not):
        return _compile_not(node)
    if isinstance(node, And):
        return _compile_and([compile_condition(operand) for operand in node.operands])
    if isinstance(node, Or):
        return _compile_or([compile_condition(operand) for operand in node.operands])
    raise TypeError(f"not an SQL92 condition node: {node!r}")


# -- values and the rules of comparison, shared by the general paths and by constant folding ---------------------


def _constant(result: Truth) -> Evaluator:
    return lambda properties: result


def _value_getter(value: Value) -> Callable[[Mapping[str, str]], LiteralValue]:
    if isinstance(value, Property):
        name = value.name
        return lambda properties: properties.get(name)
    constant = value.value
    return lambda properties: constant


def _as_number(value: LiteralValue) -> Number | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        return _to_number(value)
    return value


def _negate(result: Truth) -> Truth:
    return None if result is None else not result


def _equals(left: LiteralValue, right: LiteralValue) -> Truth:
    if left is None or right is None:
        return None
    if isinstance(left, bool) or isinstance(right, bool):
        if isinstance(left, bool) and isinstance(right, bool):
            return left == right
        flag, other = (left, right) if isinstance(left, bool) else (right, left)
        if isinstance(other, str):
            return other.lower() == ("true" if flag else "false")
        return False  # a number is neither TRUE nor FALSE
    if isinstance(left, str) and isinstance(right, str):
        return left == right
    left_number, right_number = _as_number(left), _as_number(right)
    if left_number is None or right_number is None:
        return None
    return left_number == right_number


def _compare(op: CompareOp, left: LiteralValue, right: LiteralValue) -> Truth:
    if op is CompareOp.EQ:
        return _equals(left, right)
    if op is CompareOp.NE:
        return _negate(_equals(left, right))
    left_number, right_number = _as_number(left), _as_number(right)
    if left_number is None or right_number is None:
        return None
    return _OPERATORS[op](left_number, right_number)


def _and(results: Iterable[Truth]) -> Truth:
    unknown = False
    for result in results:
        if result is False:
            return False
        if result is None:
            unknown = True
    return None if unknown else True


# -- predicates ----------------------------------------------------------------------------------------------------


def _compile_comparison(node: Comparison) -> Evaluator:
    op, left, right = node.op, node.left, node.right
    if isinstance(left, Literal) and isinstance(right, Literal):
        return _constant(_compare(op, left.value, right.value))
    if isinstance(left, Property) and isinstance(right, Literal):
        return _property_against_literal(op, left.name, right.value)
    if isinstance(left, Literal) and isinstance(right, Property):
        return _property_against_literal(_MIRRORED[op], right.name, left.value)
    get_left, get_right = _value_getter(left), _value_getter(right)
    return lambda properties: _compare(op, get_left(properties), get_right(properties))


def _property_against_literal(op: CompareOp, name: str, literal: LiteralValue) -> Evaluator:
    """The hot path of most selectors, so one closure per case and no generic dispatch per message."""
    if isinstance(literal, bool):
        expected = "true" if literal else "false"
        equal = op is CompareOp.EQ

        def against_boolean(properties: Mapping[str, str]) -> Truth:
            text = properties.get(name)
            return None if text is None else (text.lower() == expected) is equal

        return against_boolean
    if isinstance(literal, str):
        equal = op is CompareOp.EQ

        def against_string(properties: Mapping[str, str]) -> Truth:
            text = properties.get(name)
            return None if text is None else (text == literal) is equal

        return against_string
    if isinstance(literal, int | float):
        number, compare = literal, _OPERATORS[op]

        def against_number(properties: Mapping[str, str]) -> Truth:
            text = properties.get(name)
            if text is None:
                return None
            value = _to_number(text)
            return None if value is None else compare(value, number)

        return against_number
    # The parser refuses `= NULL`; should one get here, it is UNKNOWN like any comparison with NULL.
    return _constant(None)


def _compile_between(node: Between) -> Evaluator:
    negated = node.negated
    value, low, high = node.value, node.low, node.high
    if isinstance(value, Property) and isinstance(low, Literal) and isinstance(high, Literal):
        name, low_number, high_number = value.name, _as_number(low.value), _as_number(high.value)
        if low_number is None or high_number is None:
            return _constant(None)

        def between_literals(properties: Mapping[str, str]) -> Truth:
            text = properties.get(name)
            if text is None:
                return None
            number = _to_number(text)
            return None if number is None else (low_number <= number <= high_number) is not negated

        return between_literals
    get_value, get_low, get_high = _value_getter(value), _value_getter(low), _value_getter(high)

    def between(properties: Mapping[str, str]) -> Truth:
        candidate = get_value(properties)
        inside = _and(
            (
                _compare(CompareOp.GE, candidate, get_low(properties)),
                _compare(CompareOp.LE, candidate, get_high(properties)),
            )
        )
        return _negate(inside) if negated else inside

    return between


def _compile_in(node: In) -> Evaluator:
    negated = node.negated
    options = [option.value for option in node.options]
    if isinstance(node.value, Property):
        name = node.value.name
        if all(isinstance(option, str) for option in options):
            strings = frozenset(options)

            def in_strings(properties: Mapping[str, str]) -> Truth:
                text = properties.get(name)
                return None if text is None else (text in strings) is not negated

            return in_strings
        if all(isinstance(option, int | float) and not isinstance(option, bool) for option in options):
            # 5 and 5.0 hash alike, so a set lookup is numeric equality.
            numbers = frozenset(options)

            def in_numbers(properties: Mapping[str, str]) -> Truth:
                text = properties.get(name)
                if text is None:
                    return None
                number = _to_number(text)
                return None if number is None else (number in numbers) is not negated

            return in_numbers
    get_value = _value_getter(node.value)

    def in_options(properties: Mapping[str, str]) -> Truth:
        candidate = get_value(properties)
        found: Truth = False
        for option in options:
            equal = _equals(candidate, option)
            if equal:
                found = True
                break
            if equal is None:
                found = None
        return _negate(found) if negated else found

    return in_options


def _compile_is_null(node: IsNull) -> Evaluator:
    negated = node.negated
    if isinstance(node.value, Property):
        name = node.value.name
        return lambda properties: (name in properties) is negated
    return _constant((node.value.value is None) is not negated)


def _compile_string_match(node: StringMatch) -> Evaluator:
    negated, pattern, test = node.negated, node.pattern, _STRING_TESTS[node.op]
    if not pattern:
        return _constant(None)
    if isinstance(node.value, Literal):
        text = node.value.value
        return _constant(None if not isinstance(text, str) else test(text, pattern) is not negated)
    name = node.value.name

    def string_match(properties: Mapping[str, str]) -> Truth:
        text = properties.get(name)
        return None if text is None else test(text, pattern) is not negated

    return string_match


# -- logic -------------------------------------------------------------------------------------------------------


def _compile_not(node: Not) -> Evaluator:
    operand = compile_condition(node.operand)

    def negation(properties: Mapping[str, str]) -> Truth:
        result = operand(properties)
        return None if result is None else not result

    return negation


def _compile_and(operands: list[Evaluator]) -> Evaluator:
    def conjunction(properties: Mapping[str, str]) -> Truth:
        unknown = False
        for operand in operands:
            result = operand(properties)
            if result is False:
                return False
            if result is None:
                unknown = True
        return None if unknown else True

    return conjunction


def _compile_or(operands: list[Evaluator]) -> Evaluator:
    def disjunction(properties: Mapping[str, str]) -> Truth:
        unknown = False
        for operand in operands:
            result = operand(properties)
            if result is True:
                return True
            if result is None:
                unknown = True
        return None if unknown else False

    return disjunction
