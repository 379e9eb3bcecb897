"""Splits an SQL92 filter expression into tokens, each with its position for error messages.

Keywords are case-insensitive (`and`, `And` and `AND` are the same token); property names are case-sensitive and
a property cannot be named like a keyword. Whitespace is space, tab, CR, LF and form feed, as in RocketMQ's
grammar. RocketMQ's `--` and `/* */` comments, hexadecimal and octal literals and the `L` suffix are not accepted.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import Enum

from core.filter.errors import FilterExpressionError

SQL92_KIND = "SQL92"

KEYWORDS = frozenset(
    {"AND", "OR", "NOT", "BETWEEN", "IN", "IS", "NULL", "TRUE", "FALSE", "CONTAINS", "STARTSWITH", "ENDSWITH"}
)
_WHITESPACE = " \t\r\n\f"
# ASCII only: str.isdigit() and \d would also take other scripts' digits.
_NUMBER = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
_TWO_CHAR_OPERATORS = frozenset({"<>", "<=", ">="})
_ONE_CHAR_TOKENS = {"=": "OPERATOR", "<": "OPERATOR", ">": "OPERATOR", "(": "LPAREN", ")": "RPAREN", ",": "COMMA"}
# Characters people bring from other languages, and what to write instead.
_HINTS = {
    '"': "strings take single quotes, as in 'abc'",
    "!": "write <> for 'not equal' and NOT for negation",
    "&": "write AND",
    "|": "write OR",
    "%": "there is no LIKE; use CONTAINS, STARTSWITH or ENDSWITH",
    "*": "there is no arithmetic; compare properties with literals",
    "+": "there is no arithmetic; compare properties with literals",
}


class TokenKind(Enum):
    NUMBER = "number"
    STRING = "string"
    IDENTIFIER = "property"
    KEYWORD = "keyword"
    OPERATOR = "operator"
    MINUS = "'-'"
    LPAREN = "'('"
    RPAREN = "')'"
    COMMA = "','"
    END = "end of expression"


@dataclass(frozen=True, slots=True)
class Token:
    kind: TokenKind
    # The source text, except for KEYWORD (upper-cased) and STRING (the decoded value).
    text: str
    position: int
    number: int | float = 0

    def is_keyword(self, *words: str) -> bool:
        return self.kind is TokenKind.KEYWORD and self.text in words

    def describe(self) -> str:
        """How an error message names this token: "end of expression", "'AND'", "string 'abc'"."""
        if self.kind is TokenKind.END:
            return "end of expression"
        if self.kind is TokenKind.STRING:
            return f"string {_quote(self.text)}"
        if self.kind is TokenKind.NUMBER:
            return f"number {self.text}"
        if self.kind is TokenKind.IDENTIFIER:
            return f"property '{_shorten(self.text)}'"
        return f"'{self.text}'"


def tokenize(expression: str) -> list[Token]:
    """All tokens of `expression`, ending with an END token at position len(expression)."""
    tokens = []
    length = len(expression)
    position = 0
    while position < length:
        char = expression[position]
        if char in _WHITESPACE:
            position += 1
            continue
        start = position
        if char == "'":
            text, position = _read_string(expression, start)
            tokens.append(Token(TokenKind.STRING, text, start))
        elif char.isascii() and (char.isdigit() or (char == "." and _NUMBER.match(expression, start))):
            token, position = _read_number(expression, start)
            tokens.append(token)
        elif char.isascii() and (char.isalpha() or char == "_"):
            match = _IDENTIFIER.match(expression, start)
            assert match is not None  # the first character is a letter or '_'
            word = match.group()
            position = match.end()
            if word.upper() in KEYWORDS:
                tokens.append(Token(TokenKind.KEYWORD, word.upper(), start))
            else:
                tokens.append(Token(TokenKind.IDENTIFIER, word, start))
        elif expression[start : start + 2] in _TWO_CHAR_OPERATORS:
            tokens.append(Token(TokenKind.OPERATOR, expression[start : start + 2], start))
            position += 2
        elif char in _ONE_CHAR_TOKENS:
            tokens.append(Token(TokenKind[_ONE_CHAR_TOKENS[char]], char, start))
            position += 1
        elif char == "-":
            tokens.append(Token(TokenKind.MINUS, char, start))
            position += 1
        else:
            hint = _HINTS.get(char, "expected a property name, a literal, an operator or a parenthesis")
            raise FilterExpressionError(SQL92_KIND, expression, start, f"unexpected character {char!r}; {hint}")
    tokens.append(Token(TokenKind.END, "", length))
    return tokens


def _read_string(expression: str, start: int) -> tuple[str, int]:
    """The decoded string literal starting with the quote at `start`, and the position after its closing quote."""
    parts = []
    position = start + 1
    while True:
        quote = expression.find("'", position)
        if quote < 0:
            raise FilterExpressionError(
                SQL92_KIND,
                expression,
                start,
                "unterminated string: no closing quote; end it with ' (write '' for a quote inside a string)",
            )
        parts.append(expression[position:quote])
        if expression.startswith("''", quote):
            parts.append("'")
            position = quote + 2
        else:
            return "".join(parts), quote + 1


def _read_number(expression: str, start: int) -> tuple[Token, int]:
    match = _NUMBER.match(expression, start)
    assert match is not None  # the caller saw a digit or '.' followed by a digit
    end = match.end()
    if end < len(expression) and (expression[end].isalnum() or expression[end] in "_."):
        bad_end = end
        while bad_end < len(expression) and (expression[bad_end].isalnum() or expression[bad_end] in "_."):
            bad_end += 1
        raise FilterExpressionError(
            SQL92_KIND,
            expression,
            start,
            f"malformed number {expression[start:bad_end]!r}; write decimal numbers such as 42, 3.14 or 1e6",
        )
    text = match.group()
    number: int | float
    if any(c in text for c in ".eE"):
        number = float(text)
        if math.isinf(number):
            raise FilterExpressionError(
                SQL92_KIND, expression, start, f"number {text} is out of range; use at most about 1.7e308"
            )
    else:
        number = int(text)
    return Token(TokenKind.NUMBER, text, start, number), end


def _shorten(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _quote(text: str) -> str:
    return "'" + _shorten(text).replace("'", "''") + "'"
