"""Invalid patterns are refused at compile time with the JSON path in the pattern and the reason."""

from __future__ import annotations

import pytest

from eventbridge.patterns.compiler import MAX_ALTERNATIVES, compile_pattern, compile_pattern_json
from eventbridge.patterns.errors import PatternError

INVALID: list[tuple[object, str, str]] = [
    (["a"], "", "must be a JSON object"),
    ({}, "", "empty object"),
    ({"detail": {}}, "detail", "empty object"),
    ({"source": "shop"}, "source", 'write ["shop"]'),
    ({"source": []}, "source", "empty array"),
    ({"source": [["a"]]}, "source[0]", "cannot nest"),
    ({"detail": {"temp": [{"numeric": [">", "hot"]}]}}, "detail.temp[0].numeric[1]", "expected a number"),
    ({"detail": {"temp": [{"numeric": ["~", 1]}]}}, "detail.temp[0].numeric[0]", "unknown comparison"),
    ({"t": [{"numeric": [">", 1, ">", 2]}]}, "t[0].numeric[2]", "two lower bounds"),
    ({"t": [{"numeric": ["<", 1, "<=", 2]}]}, "t[0].numeric[2]", "two upper bounds"),
    ({"t": [{"numeric": [">", 5, "<", 1]}]}, "t[0].numeric", "range is empty"),
    ({"t": [{"numeric": [">", 5, "<", 5]}]}, "t[0].numeric", "range is empty"),
    ({"t": [{"numeric": ["=", 5, "<", 6]}]}, "t[0].numeric[0]", "'=' cannot be combined"),
    ({"t": [{"numeric": [">"]}]}, "t[0].numeric", "expected [OP, NUMBER]"),
    ({"t": [{"numeric": [">", True]}]}, "t[0].numeric[1]", "not a boolean"),
    ({"s": [{"prefix": 1}]}, "s[0].prefix", "expected a string"),
    ({"s": [{"suffix": None}]}, "s[0].suffix", "expected a string"),
    ({"s": [{"prefix": {"wildcard": "a"}}]}, "s[0].prefix", "equals-ignore-case"),
    ({"s": [{"suffix": {"equals-ignore-case": 1}}]}, "s[0].suffix.equals-ignore-case", "expected a string"),
    ({"s": [{"equals-ignore-case": ["a"]}]}, "s[0].equals-ignore-case", "expected a string"),
    ({"s": [{"wildcard": "a**b"}]}, "s[0].wildcard", "consecutive '*'"),
    ({"s": [{"wildcard": "a\\b"}]}, "s[0].wildcard", "invalid escape"),
    ({"s": [{"exists": "yes"}]}, "s[0].exists", "true or false"),
    ({"ip": [{"cidr": "10.0.0.0/33"}]}, "ip[0].cidr", "CIDR"),
    ({"ip": [{"cidr": "not-an-ip"}]}, "ip[0].cidr", "CIDR"),
    ({"s": [{"anything-but": []}]}, "s[0].anything-but", "empty list"),
    ({"s": [{"anything-but": [True]}]}, "s[0].anything-but[0]", "string or a number"),
    ({"s": [{"anything-but": {"numeric": [">", 1]}}]}, "s[0].anything-but", "cannot hold"),
    ({"s": [{"anything-but": {"prefix": 1}}]}, "s[0].anything-but.prefix", "expected a string"),
    ({"s": [{"anything-but": None}]}, "s[0].anything-but", "expected a string, a number"),
    ({"s": [{"regex": "a.*"}]}, "s[0]", 'unknown operator "regex"'),
    ({"s": [{"prefix": "a", "suffix": "b"}]}, "s[0]", "exactly one operator"),
    ({"$or": {"a": ["x"]}}, "$or", "non-empty array"),
    ({"$or": []}, "$or", "non-empty array"),
    ({"d": {"$or": [{"a": ["x"]}, "b"]}}, "d.$or[1]", "pattern object"),
    ({"d": {"$or": [{"a": ["x"]}, {"b": [{"numeric": []}]}]}}, "d.$or[1].b[0].numeric", "expected [OP"),
]


@pytest.mark.parametrize(("pattern", "path", "reason"), INVALID, ids=[f"{c[1]}:{c[2]}" for c in INVALID])
def test_invalid_pattern_names_path_and_reason(pattern: object, path: str, reason: str) -> None:
    with pytest.raises(PatternError) as caught:
        compile_pattern(pattern)
    assert caught.value.path == path
    assert reason in caught.value.reason
    assert str(caught.value).startswith(f"{path or '<pattern>'}: ")


def test_or_explosion_is_refused() -> None:
    branches = [{"a": [str(i)]} for i in range(40)]
    pattern = {"x": {"$or": branches}, "y": {"$or": branches}}
    with pytest.raises(PatternError, match=f"more than {MAX_ALTERNATIVES} alternatives"):
        compile_pattern(pattern)


def test_json_text_errors_are_pattern_errors() -> None:
    with pytest.raises(PatternError, match=r"not valid JSON.*line 1"):
        compile_pattern_json('{"a": [1,]}')
    assert len(compile_pattern_json('{"a": [1], "$or": [{"b": [2]}, {"c": [3]}]}').alternatives) == 2
