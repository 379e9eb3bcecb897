"""A plain reference evaluator of event patterns, written from the semantics in eventbridge.patterns.compiler's
docstring without any of the matcher's indexes: the property tests check the compiled matcher against it."""

from __future__ import annotations

import ipaddress
from collections.abc import Iterator
from typing import Any


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _flatten(value: object) -> Iterator[object]:
    if isinstance(value, list):
        for element in value:
            yield from _flatten(element)
    else:
        yield value


def leaf_values(event: dict[str, Any], path: tuple[str, ...]) -> list[object]:
    current: list[object] = [event]
    for key in path:
        current = [x for obj in current if isinstance(obj, dict) and key in obj for x in _flatten(obj[key])]
    return [value for value in current if not isinstance(value, dict)]


def _equal(pattern_value: object, value: object) -> bool:
    if _is_number(pattern_value):
        return _is_number(value) and value == pattern_value
    if isinstance(pattern_value, bool) or pattern_value is None:
        return value is pattern_value
    return isinstance(value, str) and value == pattern_value


def _wildcard(pattern: str, text: str) -> bool:
    tokens: list[str | None] = []  # None is a star
    i = 0
    while i < len(pattern):
        if pattern[i] == "\\":
            tokens.append(pattern[i + 1])
            i += 2
        else:
            tokens.append(None if pattern[i] == "*" else pattern[i])
            i += 1
    # reachable[j]: the tokens so far can match text[:j]
    reachable = [True] + [False] * len(text)
    for token in tokens:
        if token is None:
            for j in range(1, len(text) + 1):
                reachable[j] = reachable[j] or reachable[j - 1]
        else:
            reachable = [False] + [reachable[j - 1] and text[j - 1] == token for j in range(1, len(text) + 1)]
    return reachable[len(text)]


def _compare(operator: str, value: float, bound: float) -> bool:
    return {
        "=": value == bound,
        "<": value < bound,
        "<=": value <= bound,
        ">": value > bound,
        ">=": value >= bound,
    }[operator]


def _accepts(matcher: object, value: object) -> bool:
    if not isinstance(matcher, dict):
        return _equal(matcher, value)
    ((name, argument),) = matcher.items()
    is_text = isinstance(value, str)
    if name in ("prefix", "suffix") and isinstance(argument, dict):
        text = argument["equals-ignore-case"].casefold()
        folded = value.casefold() if is_text else ""
        return is_text and (folded.startswith(text) if name == "prefix" else folded.endswith(text))
    if name == "prefix":
        return is_text and value.startswith(argument)
    if name == "suffix":
        return is_text and value.endswith(argument)
    if name == "equals-ignore-case":
        return is_text and value.casefold() == argument.casefold()
    if name == "wildcard":
        return is_text and _wildcard(argument, value)
    if name == "numeric":
        pairs = zip(argument[::2], argument[1::2], strict=True)
        return _is_number(value) and all(_compare(op, value, bound) for op, bound in pairs)
    if name == "cidr":
        if not is_text:
            return False
        try:
            address = ipaddress.ip_address(value)
        except ValueError:
            return False
        network = ipaddress.ip_network(argument, strict=False)
        return address.version == network.version and address in network
    if name == "anything-but":
        if isinstance(argument, dict):
            ((inner, text),) = argument.items()
            texts = text if isinstance(text, list) else [text]
            return not any(_accepts({inner: t}, value) for t in texts)
        excluded = argument if isinstance(argument, list) else [argument]
        return not any(_equal(x, value) for x in excluded)
    raise AssertionError(name)


def _leaf_matches(matchers: list[object], values: list[object]) -> bool:
    for matcher in matchers:
        if isinstance(matcher, dict) and "exists" in matcher:
            if bool(values) == matcher["exists"]:
                return True
        elif any(_accepts(matcher, value) for value in values):
            return True
    return False


def reference_matches(pattern: dict[str, Any], event: dict[str, Any], path: tuple[str, ...] = ()) -> bool:
    for key, value in pattern.items():
        if key == "$or":
            if not any(reference_matches(sub, event, path) for sub in value):
                return False
        elif isinstance(value, dict):
            if not reference_matches(value, event, (*path, key)):
                return False
        elif not _leaf_matches(value, leaf_values(event, (*path, key))):
            return False
    return True
