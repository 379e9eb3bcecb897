"""The syntax tree of an SQL92 filter expression, as the parser builds it and the compiler reads it.

Values (`Property`, `Literal`) are operands; every other node is a condition that evaluates to TRUE, FALSE or
UNKNOWN. `And` and `Or` hold all the operands of a chain (`a AND b AND c` is one node), so a long chain costs a
loop, not a deep recursion. Each node keeps the position of its first character for error messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

# A literal's value. bool is tested before int everywhere: in Python True is also an int.
LiteralValue = str | int | float | bool | None


class CompareOp(Enum):
    EQ = "="
    NE = "<>"
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="

    @property
    def is_ordering(self) -> bool:
        return self not in (CompareOp.EQ, CompareOp.NE)


class StringOp(Enum):
    CONTAINS = "CONTAINS"
    STARTSWITH = "STARTSWITH"
    ENDSWITH = "ENDSWITH"


@dataclass(frozen=True, slots=True)
class Property:
    name: str
    position: int


@dataclass(frozen=True, slots=True)
class Literal:
    value: LiteralValue
    position: int


Value = Property | Literal


@dataclass(frozen=True, slots=True)
class Comparison:
    op: CompareOp
    left: Value
    right: Value


@dataclass(frozen=True, slots=True)
class Between:
    value: Value
    low: Value
    high: Value
    negated: bool


@dataclass(frozen=True, slots=True)
class In:
    value: Value
    options: tuple[Literal, ...]
    negated: bool


@dataclass(frozen=True, slots=True)
class IsNull:
    value: Value
    negated: bool


@dataclass(frozen=True, slots=True)
class StringMatch:
    op: StringOp
    value: Value
    pattern: str
    negated: bool


@dataclass(frozen=True, slots=True)
class BooleanConstant:
    """TRUE or FALSE standing alone as a condition."""

    value: bool


@dataclass(frozen=True, slots=True)
class Not:
    operand: Condition


@dataclass(frozen=True, slots=True)
class And:
    operands: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class Or:
    operands: tuple[Condition, ...]


Condition = Comparison | Between | In | IsNull | StringMatch | BooleanConstant | Not | And | Or
