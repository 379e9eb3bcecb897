"""Event patterns (AWS EventBridge semantics) validated and compiled into conditions.

A pattern is a JSON object. Each key names a field of the event; its value is either a nested object (a pattern
for the nested field) or a non-empty array of matchers (`eventbridge.patterns.operators` states each one's
semantics). Every field of a pattern must match (AND); the matchers in one array are alternatives (OR). An event
field holding an array matches when any of its elements does; arrays of objects are flattened, so
``{"items": {"sku": ["a"]}}`` matches ``{"items": [{"sku": "b"}, {"sku": "a"}]}`` (each field is matched on its
own, as event-ruler's `rulesForEvent`, not element by element).

Matchers in an array::

    "text", 12.5, true, null                   exact value (numbers compared numerically)
    {"prefix": "ab"}  {"suffix": ".png"}        string starts / ends with
    {"prefix": {"equals-ignore-case": "ab"}}    the same under Unicode case folding (suffix too)
    {"equals-ignore-case": "Alice"}             string equal under Unicode case folding
    {"wildcard": "dir/*.png"}                   '*' any run of characters; '\\*' and '\\\\' literal
    {"anything-but": V}                         V: a string or number, a non-empty list of them, or an object
                                                {"prefix"|"suffix"|"wildcard": S} or {"equals-ignore-case": S|[S...]}
    {"numeric": ["=", 5]}  {"numeric": [">", 0, "<=", 5]}
                                                one of =, <, <=, >, >= with a number, or a lower (>, >=) and an
                                                upper (<, <=) bound in either order
    {"exists": true|false}                      the field has (no) leaf value in the event
    {"cidr": "10.0.0.0/24"}                     an IPv4 or IPv6 address string inside the network

``"$or": [pattern, ...]`` at any level: at least one of the sub-patterns (whose fields are relative to the
object holding ``$or``) must match, besides the object's other fields.

Compiling expands every ``$or`` into alternatives, so a `CompiledPattern` is a disjunction of conjunctions of
`Condition` s (a field path and its matchers). Errors raise `PatternError` with the JSON path in the pattern.
"""

from __future__ import annotations

import ipaddress
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from eventbridge.patterns.errors import PatternError
from eventbridge.patterns.operators import (
    AnythingBut,
    Cidr,
    EqualsIgnoreCase,
    Exact,
    Excluded,
    Exists,
    Numeric,
    Operator,
    Prefix,
    PrefixIgnoreCase,
    Range,
    Suffix,
    SuffixIgnoreCase,
    Wildcard,
    is_number,
)

# `$or` expands multiplicatively ($or of 10 inside $or of 10 is 100 alternatives). event-ruler bounds the same
# blow-up with its rule-complexity limit; beyond this many alternatives a pattern is refused, not slowly matched.
MAX_ALTERNATIVES: Final = 1024
# Fields nested deeper than this are refused; event JSON nested so deep is a mistake, and recursion stays shallow.
MAX_DEPTH: Final = 64

OR_KEY: Final = "$or"
NUMERIC_OPERATORS: Final = ("=", "<", "<=", ">", ">=")
OPERATOR_NAMES: Final = (
    "prefix",
    "suffix",
    "equals-ignore-case",
    "wildcard",
    "anything-but",
    "numeric",
    "exists",
    "cidr",
)

Path = tuple[str, ...]


@dataclass(slots=True, frozen=True)
class Condition:
    """The field at `path` (keys from the event's root) must have a leaf value some matcher accepts (with
    `Exists` as described in `eventbridge.patterns.operators`)."""

    path: Path
    matchers: tuple[Operator, ...]


Conjunction = tuple[Condition, ...]


@dataclass(slots=True, frozen=True)
class CompiledPattern:
    alternatives: tuple[Conjunction, ...]


def compile_pattern(pattern: object) -> CompiledPattern:
    """Validate `pattern` (a parsed JSON value) and compile it; raises PatternError."""
    if not isinstance(pattern, Mapping):
        raise PatternError("", f"a pattern must be a JSON object, not {_type_name(pattern)}")
    return CompiledPattern(tuple(_compile_object(pattern, (), "", 0)))


def compile_pattern_json(text: str) -> CompiledPattern:
    """Parse `text` as JSON and compile it; a JSON syntax error is a PatternError too."""
    try:
        pattern = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PatternError("", f"not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    return compile_pattern(pattern)


def _compile_object(pattern: Mapping[object, object], path: Path, where: str, depth: int) -> list[Conjunction]:
    if depth > MAX_DEPTH:
        raise PatternError(where, f"nested deeper than {MAX_DEPTH} levels")
    if not pattern:
        raise PatternError(where, "an empty object matches nothing; give at least one field")
    alternatives: list[Conjunction] = [()]
    for key, value in pattern.items():
        if not isinstance(key, str):
            raise PatternError(where, f"field names must be strings, not {_type_name(key)}")
        here = _join(where, key)
        if key == OR_KEY:
            options = _compile_or(value, path, here, depth)
        elif isinstance(value, Mapping):
            options = _compile_object(value, (*path, key), here, depth + 1)
        elif isinstance(value, list):
            options = [(Condition((*path, key), _compile_leaf(value, here)),)]
        else:
            raise PatternError(
                here,
                f"expected an array of matchers or a nested object, not {_type_name(value)}; write [{_show(value)}]",
            )
        alternatives = [mine + theirs for mine in alternatives for theirs in options]
        if len(alternatives) > MAX_ALTERNATIVES:
            raise PatternError(here, f"'$or' expands to more than {MAX_ALTERNATIVES} alternatives; simplify")
    return alternatives


def _compile_or(value: object, path: Path, where: str, depth: int) -> list[Conjunction]:
    if not isinstance(value, list) or not value:
        raise PatternError(where, "'$or' takes a non-empty array of pattern objects")
    options: list[Conjunction] = []
    for index, sub in enumerate(value):
        here = f"{where}[{index}]"
        if not isinstance(sub, Mapping):
            raise PatternError(here, f"each '$or' entry must be a pattern object, not {_type_name(sub)}")
        options.extend(_compile_object(sub, path, here, depth + 1))
    return options


def _compile_leaf(matchers: list[object], where: str) -> tuple[Operator, ...]:
    if not matchers:
        raise PatternError(where, "an empty array matches nothing; give at least one matcher")
    return tuple(_compile_matcher(matcher, f"{where}[{index}]") for index, matcher in enumerate(matchers))


def _compile_matcher(matcher: object, where: str) -> Operator:
    if matcher is None or isinstance(matcher, str | bool):
        return Exact.of(matcher)
    if is_number(matcher):
        return Exact.of(_finite(matcher, where))
    if isinstance(matcher, list):
        raise PatternError(where, "arrays cannot nest in a matcher array; list the values in one array")
    if not isinstance(matcher, Mapping):
        raise PatternError(where, f"a matcher must be a value or an operator object, not {_type_name(matcher)}")
    if len(matcher) != 1:
        raise PatternError(where, f"an operator object holds exactly one operator, not {len(matcher)}")
    ((name, argument),) = matcher.items()
    here = _join(where, str(name))
    if name == "prefix":
        if isinstance(argument, Mapping):
            return PrefixIgnoreCase(_ignore_case(argument, here))
        return Prefix(_string(argument, here))
    if name == "suffix":
        if isinstance(argument, Mapping):
            return SuffixIgnoreCase(_ignore_case(argument, here))
        return Suffix(_string(argument, here))
    if name == "equals-ignore-case":
        return EqualsIgnoreCase.of(_string(argument, here))
    if name == "wildcard":
        return _wildcard(argument, here)
    if name == "anything-but":
        return AnythingBut(_excluded(argument, here))
    if name == "numeric":
        return Numeric(_range(argument, here))
    if name == "exists":
        if not isinstance(argument, bool):
            raise PatternError(here, f"expected true or false, not {_show(argument)}")
        return Exists(argument)
    if name == "cidr":
        return _cidr(argument, here)
    raise PatternError(where, f"unknown operator {_show(name)}; expected one of {', '.join(OPERATOR_NAMES)}")


def _ignore_case(argument: Mapping[object, object], where: str) -> str:
    if list(argument) != ["equals-ignore-case"]:
        raise PatternError(where, 'expected a string or {"equals-ignore-case": STRING}')
    return _string(argument["equals-ignore-case"], f"{where}.equals-ignore-case").casefold()


def _excluded(argument: object, where: str) -> tuple[Excluded, ...]:
    if isinstance(argument, str) or is_number(argument):
        return (Exact.of(_finite(argument, where) if is_number(argument) else argument),)
    if isinstance(argument, list):
        if not argument:
            raise PatternError(where, "an empty list excludes nothing; give at least one value")
        values: list[Excluded] = []
        for index, value in enumerate(argument):
            if not (isinstance(value, str) or is_number(value)):
                raise PatternError(f"{where}[{index}]", f"expected a string or a number, not {_type_name(value)}")
            values.append(Exact.of(_finite(value, f"{where}[{index}]") if is_number(value) else value))
        return tuple(values)
    if isinstance(argument, Mapping):
        if len(argument) != 1:
            raise PatternError(where, "expected one of prefix, suffix, wildcard, equals-ignore-case")
        ((name, inner),) = argument.items()
        here = _join(where, str(name))
        if name == "prefix":
            return (Prefix(_string(inner, here)),)
        if name == "suffix":
            return (Suffix(_string(inner, here)),)
        if name == "wildcard":
            return (_wildcard(inner, here),)
        if name == "equals-ignore-case":
            texts = inner if isinstance(inner, list) and inner else [inner]
            return tuple(EqualsIgnoreCase.of(_string(text, here)) for text in texts)
        raise PatternError(
            where, f"'anything-but' cannot hold {_show(name)}; expected prefix, suffix, wildcard, equals-ignore-case"
        )
    raise PatternError(where, f"expected a string, a number, a list of them or an object, not {_type_name(argument)}")


def _range(argument: object, where: str) -> Range:
    if not isinstance(argument, list) or len(argument) not in (2, 4):
        raise PatternError(where, 'expected [OP, NUMBER] or [">"|">=", LOW, "<"|"<=", HIGH]')
    lower: tuple[float, bool] | None = None
    upper: tuple[float, bool] | None = None
    for index in range(0, len(argument), 2):
        operator, number = argument[index], argument[index + 1]
        if operator not in NUMERIC_OPERATORS:
            raise PatternError(f"{where}[{index}]", f"unknown comparison {_show(operator)}; use =, <, <=, >, >=")
        if not is_number(number):
            raise PatternError(f"{where}[{index + 1}]", f"expected a number, not {_type_name(number)}")
        value = float(_finite(number, f"{where}[{index + 1}]"))  # type: ignore[arg-type]
        if operator == "=":
            if len(argument) != 2:
                raise PatternError(f"{where}[{index}]", "'=' cannot be combined with another comparison")
            return Range(value, True, value, True)
        if operator in (">", ">="):
            if lower is not None:
                raise PatternError(f"{where}[{index}]", "two lower bounds; give one of > or >= and one of < or <=")
            lower = (value, operator == ">=")
        else:
            if upper is not None:
                raise PatternError(f"{where}[{index}]", "two upper bounds; give one of > or >= and one of < or <=")
            upper = (value, operator == "<=")
    result = Range(
        lower[0] if lower else None, bool(lower and lower[1]), upper[0] if upper else None, bool(upper and upper[1])
    )
    if lower and upper and (lower[0] > upper[0] or (lower[0] == upper[0] and not (lower[1] and upper[1]))):
        raise PatternError(where, "the range is empty: the lower bound is above the upper bound")
    return result


def _wildcard(argument: object, where: str) -> Wildcard:
    text = _string(argument, where)
    try:
        return Wildcard.of(text)
    except ValueError as exc:
        raise PatternError(where, str(exc)) from None


def _cidr(argument: object, where: str) -> Cidr:
    text = _string(argument, where)
    try:
        return Cidr(ipaddress.ip_network(text, strict=False))
    except ValueError as exc:
        raise PatternError(where, f"not an IPv4 or IPv6 network in CIDR notation: {exc}") from None


def _string(argument: object, where: str) -> str:
    if not isinstance(argument, str):
        raise PatternError(where, f"expected a string, not {_type_name(argument)}")
    return argument


def _finite(number: object, where: str) -> object:
    if isinstance(number, float) and not math.isfinite(number):
        raise PatternError(where, "numbers must be finite")
    return number


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _show(value: object) -> str:
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if is_number(value):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__
