"""A recursive-descent parser from SQL92 filter tokens to the syntax tree of `sql92_ast`.

    condition   := or
    or          := and (OR and)*
    and         := not (AND not)*
    not         := NOT not | primary
    primary     := '(' or ')' | TRUE | FALSE | value predicate
    predicate   := ('=' | '<>' | '<' | '<=' | '>' | '>=') value
                 | [NOT] BETWEEN value AND value
                 | [NOT] IN '(' literal (',' literal)* ')'
                 | IS [NOT] NULL
                 | [NOT] (CONTAINS | STARTSWITH | ENDSWITH) string
    value       := property | literal
    literal     := string | ['-'] number | TRUE | FALSE | NULL

NOT applies to a whole predicate (`NOT a = 1` is `NOT (a = 1)`), as in standard SQL; RocketMQ's grammar, taken
from JMS, binds it to the operand instead, which only matters for expressions RocketMQ would then refuse.

Besides the syntax, the parser refuses what can never be meant: ordering a string, TRUE, FALSE or NULL literal
(`a > 'x'`, which RocketMQ refuses too), `= NULL` (always unknown: `IS NULL` was meant), `BETWEEN 10 AND 5`
(empty, as RocketMQ), NULL in an IN list, and a property or literal standing alone as a condition.
"""

from __future__ import annotations

from typing import NoReturn

from core.filter.errors import FilterExpressionError
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
    Not,
    Or,
    Property,
    StringMatch,
    StringOp,
    Value,
)
from core.filter.sql92_lexer import SQL92_KIND, Token, TokenKind, tokenize

# The parser recurses once per level of parentheses or NOT, and so does the compiled filter. 64 levels is far
# beyond what anyone writes by hand and keeps both well inside Python's default recursion limit of 1000.
MAX_NESTING_DEPTH = 64

_STRING_OPS = {op.value: op for op in StringOp}
_NEGATABLE = ("BETWEEN", "IN", *_STRING_OPS)


def parse_sql92(expression: str) -> Condition:
    """The syntax tree of `expression`; FilterExpressionError if it is malformed. Limits on length are the
    caller's (see `sql92.MAX_EXPRESSION_LENGTH`)."""
    return _Parser(expression, tokenize(expression)).parse()


def _is_number(value: Value) -> bool:
    return isinstance(value, Literal) and isinstance(value.value, int | float) and not isinstance(value.value, bool)


def _describe_literal(literal: Literal) -> str:
    value = literal.value
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, str):
        return "the string '" + value.replace("'", "''") + "'"
    return f"the number {value}"


class _Parser:
    def __init__(self, expression: str, tokens: list[Token]) -> None:
        self._expression = expression
        self._tokens = tokens
        self._index = 0

    # -- token access --------------------------------------------------------------------------------------------

    @property
    def _current(self) -> Token:
        return self._tokens[self._index]

    def _advance(self) -> Token:
        token = self._tokens[self._index]
        if token.kind is not TokenKind.END:
            self._index += 1
        return token

    def _fail(self, position: int, reason: str) -> NoReturn:
        raise FilterExpressionError(SQL92_KIND, self._expression, position, reason)

    def _expected(self, what: str, after: Token | None, advice: str = "") -> NoReturn:
        """Fail at the current token: `what` was expected (after the token `after`)."""
        found = self._current
        if after is None:
            where = ""
        elif after.kind is TokenKind.STRING:
            where = f" after {after.describe()}"
        else:
            where = f" after '{after.text}'"
        advice = f"; {advice}" if advice else ""
        self._fail(found.position, f"expected {what}{where} (got {found.describe()}){advice}")

    # -- grammar -------------------------------------------------------------------------------------------------

    def parse(self) -> Condition:
        if self._current.kind is TokenKind.END:
            self._fail(0, "empty expression; write a condition such as a = 'x', or subscribe by TAG '*' for all")
        condition = self._or(0)
        if self._current.kind is not TokenKind.END:
            found = self._current
            self._fail(
                found.position,
                f"unexpected {found.describe()} after a complete condition; join conditions with AND or OR",
            )
        return condition

    def _or(self, depth: int) -> Condition:
        operands = [self._and(depth)]
        while self._current.is_keyword("OR"):
            self._advance()
            operands.append(self._and(depth))
        return operands[0] if len(operands) == 1 else Or(tuple(operands))

    def _and(self, depth: int) -> Condition:
        operands = [self._not(depth)]
        while self._current.is_keyword("AND"):
            self._advance()
            operands.append(self._not(depth))
        return operands[0] if len(operands) == 1 else And(tuple(operands))

    def _not(self, depth: int) -> Condition:
        if self._current.is_keyword("NOT"):
            self._check_depth(self._advance(), depth)
            return Not(self._not(depth + 1))
        return self._primary(depth)

    def _check_depth(self, token: Token, depth: int) -> None:
        if depth >= MAX_NESTING_DEPTH:
            self._fail(
                token.position,
                f"nesting deeper than {MAX_NESTING_DEPTH} levels of parentheses and NOT; simplify the expression",
            )

    def _previous(self) -> Token | None:
        return self._tokens[self._index - 1] if self._index else None

    def _primary(self, depth: int) -> Condition:
        token = self._current
        if token.kind is TokenKind.LPAREN:
            self._check_depth(self._advance(), depth)
            inner = self._or(depth + 1)
            if self._current.kind is not TokenKind.RPAREN:
                self._expected(f"')' to close the '(' at position {token.position}", None)
            self._advance()
            return inner
        if not self._starts_value(token):
            self._expected("a condition", self._previous())
        value = self._value(self._previous())
        return self._predicate(value)

    @staticmethod
    def _starts_value(token: Token) -> bool:
        return token.kind in (
            TokenKind.IDENTIFIER,
            TokenKind.NUMBER,
            TokenKind.STRING,
            TokenKind.MINUS,
        ) or token.is_keyword("TRUE", "FALSE", "NULL")

    def _value(self, after: Token | None) -> Value:
        token = self._current
        if token.kind is TokenKind.IDENTIFIER:
            self._advance()
            return Property(token.text, token.position)
        if not self._starts_value(token):
            self._expected("a value", after, "write a property name or a literal")
        return self._literal(after)

    def _literal(self, after: Token | None) -> Literal:
        token = self._advance()
        if token.kind is TokenKind.STRING:
            return Literal(token.text, token.position)
        if token.kind is TokenKind.NUMBER:
            return Literal(token.number, token.position)
        if token.kind is TokenKind.MINUS:
            if self._current.kind is not TokenKind.NUMBER:
                self._expected("a number", token)
            return Literal(-self._advance().number, token.position)
        if token.is_keyword("TRUE", "FALSE"):
            return Literal(token.text == "TRUE", token.position)
        assert token.is_keyword("NULL"), token  # callers check _starts_value first
        return Literal(None, token.position)

    def _predicate(self, value: Value) -> Condition:
        token = self._current
        if token.kind is TokenKind.OPERATOR:
            self._advance()
            return self._comparison(CompareOp(token.text), value, self._value(token))
        negated = token.is_keyword("NOT")
        if negated:
            self._advance()
            if not self._current.is_keyword(*_NEGATABLE):
                self._expected("BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH", token, self._like_advice())
            token = self._current
        if token.is_keyword("BETWEEN"):
            self._advance()
            return self._between(value, negated, token)
        if token.is_keyword("IN"):
            self._advance()
            return In(value, self._in_list(token), negated)
        if token.kind is TokenKind.KEYWORD and token.text in _STRING_OPS:
            self._advance()
            if self._current.kind is not TokenKind.STRING:
                self._expected("a string literal", token, "write the text to look for in quotes, such as 'abc'")
            return StringMatch(_STRING_OPS[token.text], value, self._advance().text, negated)
        if token.is_keyword("IS"):
            self._advance()
            is_not = self._current.is_keyword("NOT")
            if is_not:
                self._advance()
            if not self._current.is_keyword("NULL"):
                self._expected("NULL", self._previous())
            self._advance()
            return IsNull(value, is_not)
        if isinstance(value, Literal) and isinstance(value.value, bool):
            return BooleanConstant(value.value)
        previous = self._previous()
        assert previous is not None  # a value was just read
        self._expected(
            "a comparison", previous, self._like_advice() or "compare it with =, <>, >, BETWEEN, IN or IS NULL"
        )

    def _like_advice(self) -> str:
        token = self._current
        if token.kind is TokenKind.IDENTIFIER and token.text.upper() == "LIKE":
            return "there is no LIKE; use CONTAINS, STARTSWITH or ENDSWITH"
        return ""

    def _comparison(self, op: CompareOp, left: Value, right: Value) -> Comparison:
        for operand in (left, right):
            if not isinstance(operand, Literal):
                continue
            if operand.value is None:
                alternative = "IS NOT NULL" if op is CompareOp.NE else "IS NULL"
                self._fail(operand.position, f"'{op.value}' with NULL is never true; use {alternative}")
            if op.is_ordering and not _is_number(operand):
                self._fail(
                    operand.position,
                    f"'{op.value}' compares numbers, not {_describe_literal(operand)}; "
                    "compare strings and TRUE/FALSE with = or <>",
                )
        return Comparison(op, left, right)

    def _between(self, value: Value, negated: bool, keyword: Token) -> Between:
        low = self._value(keyword)
        if not self._current.is_keyword("AND"):
            self._expected("AND", self._previous(), "BETWEEN takes two bounds, as in a BETWEEN 1 AND 5")
        high = self._value(self._advance())
        for operand in (value, low, high):
            if isinstance(operand, Literal) and not _is_number(operand):
                self._fail(operand.position, f"BETWEEN compares numbers, not {_describe_literal(operand)}")
        if isinstance(low, Literal) and isinstance(high, Literal):
            assert isinstance(low.value, int | float) and isinstance(high.value, int | float)
            if low.value > high.value:
                self._fail(
                    low.position,
                    f"BETWEEN {low.value} AND {high.value} is empty; write the lower bound first: "
                    f"BETWEEN {high.value} AND {low.value}",
                )
        return Between(value, low, high, negated)

    def _in_list(self, keyword: Token) -> tuple[Literal, ...]:
        if self._current.kind is not TokenKind.LPAREN:
            self._expected("'('", keyword, "write a list of literals such as IN ('a', 'b')")
        opening = self._advance()
        if self._current.kind is TokenKind.RPAREN:
            self._fail(self._current.position, "empty IN list; give at least one literal, such as IN ('a')")
        options = []
        while True:
            token = self._current
            if token.kind is TokenKind.IDENTIFIER:
                self._fail(
                    token.position, f"IN lists take literals only, such as IN ('a', 'b'); got {token.describe()}"
                )
            if not self._starts_value(token):
                self._expected("a literal", self._previous(), "IN lists take strings, numbers, TRUE or FALSE")
            option = self._literal(self._previous())
            if option.value is None:
                self._fail(option.position, "NULL in an IN list never matches; use IS NULL")
            options.append(option)
            separator = self._current
            if separator.kind is TokenKind.RPAREN:
                self._advance()
                return tuple(options)
            if separator.kind is not TokenKind.COMMA:
                self._expected(f"',' or ')' to close the IN list opened at position {opening.position}", None)
            self._advance()
