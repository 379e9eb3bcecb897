"""The field trie's walk takes decoded JSON (dict, list, str, int, float, bool, None) by exact type, and everything
else by isinstance as before: property, for generated rules and events, that an event built of Mappings that are not
dicts, dict and list subclasses, and str and number subclasses matches exactly as the same event of plain JSON
types, which matches as the reference evaluator says."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventbridge.patterns.compiler import compile_pattern
from eventbridge.patterns.matcher import Matcher
from tests.eventbridge.patterns.pattern_reference import reference_matches
from tests.eventbridge.patterns.pattern_strategies import events, patterns


class ReadOnly(Mapping[str, Any]):
    """A Mapping that is no dict and has no `get` of its own but the ABC's."""

    def __init__(self, items: dict[str, Any]) -> None:
        self._items = items

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)


class Dict(dict[str, Any]):
    pass


class List(list[Any]):
    pass


class Text(str):
    pass


class Integer(int):
    pass


class Real(float):
    pass


KINDS = ("readonly", "proxy", "subclass")


def convert(value: Any, kind: str) -> Any:
    """`value` with its objects and arrays (and, for "subclass", strings and numbers) of another type."""
    if isinstance(value, dict):
        items = {key: convert(inner, kind) for key, inner in value.items()}
        return ReadOnly(items) if kind == "readonly" else MappingProxyType(items) if kind == "proxy" else Dict(items)
    if isinstance(value, list):
        return List(convert(inner, kind) for inner in value)
    if kind != "subclass" or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return Text(value)
    if isinstance(value, int):
        return Integer(value)
    if isinstance(value, float):
        return Real(value)
    return value


@settings(max_examples=300)
@given(st.lists(patterns(), min_size=1, max_size=8), st.lists(events(), min_size=1, max_size=6))
def test_other_mapping_and_value_types_match_as_plain_json(
    rules: list[dict[str, Any]], sample: list[dict[str, Any]]
) -> None:
    matcher = Matcher([(index, compile_pattern(pattern)) for index, pattern in enumerate(rules)])
    for event in sample:
        expected = {index for index, pattern in enumerate(rules) if reference_matches(pattern, event)}
        assert matcher.matches(event) == expected
        for kind in KINDS:
            assert matcher.matches(convert(event, kind)) == expected, kind


@pytest.mark.parametrize(
    ("pattern", "event", "expected"),
    [
        # Arrays of objects are flattened, each field matched on its own (not element by element).
        ({"a": {"b": ["x"], "c": ["y"]}}, {"a": [{"b": "x"}, {"c": "y"}]}, True),
        ({"a": {"b": ["x"]}}, {"a": [[{"b": "x"}], {"b": "z"}]}, True),
        ({"a": {"b": ["x"]}}, {"a": [[], [[]], {"c": "x"}]}, False),
        # A field holding both an object and a value, in an array.
        ({"a": ["v"], "$or": [{"a": {"b": [1]}}]}, {"a": ["v", {"b": 1}]}, True),
        # Booleans are not numbers, at any depth and through any index.
        ({"a": [1]}, {"a": [True, {"b": 1}]}, False),
        ({"a": [0]}, {"a": False}, False),
        ({"a": [False]}, {"a": 0}, False),
        ({"a": [{"numeric": ["=", 1]}]}, {"a": True}, False),
        ({"a": [{"numeric": [">=", 0, "<", 2]}]}, {"a": [False, True]}, False),
        ({"a": [{"anything-but": [1]}]}, {"a": True}, True),
        ({"a": [{"anything-but": [0]}]}, {"a": [0, False]}, True),
        ({"a": [True]}, {"a": 1.0}, False),
        # A key the event holds in a dict with more keys than the node has children, and with fewer.
        ({"a": ["x"], "b": ["y"], "c": ["z"]}, {"a": "x", "b": "y", "c": "z", "d": 1, "e": 2}, True),
        ({"a": ["x"], "b": ["y"], "c": ["z"]}, {"a": "x", "b": "y"}, False),
        ({"a": ["x"], "b": [{"exists": False}], "c": [{"exists": False}]}, {"a": "x"}, True),
    ],
)
def test_value_kinds(pattern: dict[str, Any], event: dict[str, Any], expected: bool) -> None:
    assert reference_matches(pattern, event) is expected
    matcher = Matcher([("rule", pattern)])
    assert matcher.matches(event) == ({"rule"} if expected else set())
    for kind in KINDS:
        assert matcher.matches(convert(event, kind)) == ({"rule"} if expected else set()), kind


def test_an_event_of_another_mapping_type_at_the_root() -> None:
    matcher = Matcher([(1, {"a": ["x"]})])
    assert matcher.matches(MappingProxyType({"a": "x"})) == {1}
    assert matcher.matches(ReadOnly({"a": ["y", "x"]})) == {1}
    assert matcher.matches(Dict(a="y")) == set()
