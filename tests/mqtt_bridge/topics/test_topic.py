"""Topic name and filter validation, shared subscription parsing and the reference matcher."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqtt_bridge.errors import MqttBridgeError
from mqtt_bridge.topics.topic import (
    MAX_TOPIC_BYTES,
    SharedFilter,
    TopicError,
    filter_levels,
    first_level,
    matches,
    parse_subscription,
    validate_topic_filter,
    validate_topic_name,
)

LEVELS = ["", "$SYS", "a", "b", "+", "#"]
NAME_LEVELS = ["", "$SYS", "$x", "a", "b"]


def joined(levels: list[str]) -> str:
    return "/".join(levels)


level_lists = st.lists(st.sampled_from(LEVELS), min_size=1, max_size=5)


def reference_matches(filter_levels: list[str], name_levels: list[str], first: bool = True) -> bool:
    """A recursive restatement of the spec, independent of `matches`' loop."""
    if not filter_levels:
        return not name_levels
    head, rest = filter_levels[0], filter_levels[1:]
    if first and name_levels and name_levels[0].startswith("$") and head in ("+", "#"):
        return False
    if head == "#":
        return True
    if not name_levels:
        return False
    return (head == "+" or head == name_levels[0]) and reference_matches(rest, name_levels[1:], first=False)


# --- matching -------------------------------------------------------------------------------------------------------

# The examples of MQTT 3.1.1 / 5.0 section 4.7, and the edge cases the gateway relies on.
SPEC_EXAMPLES = [
    ("sport/tennis/player1/#", "sport/tennis/player1", True),
    ("sport/tennis/player1/#", "sport/tennis/player1/ranking", True),
    ("sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", True),
    ("sport/#", "sport", True),
    ("#", "sport/tennis", True),
    ("#", "/", True),
    ("sport/tennis/+", "sport/tennis/player1", True),
    ("sport/tennis/+", "sport/tennis/player1/ranking", False),
    ("sport/+", "sport", False),
    ("sport/+", "sport/", True),
    ("+/+", "/finance", True),
    ("/+", "/finance", True),
    ("+", "/finance", False),
    ("a/+/b", "a//b", True),
    ("a/+/b", "a/b", False),
    ("+/tennis/#", "sport/tennis", True),
    ("sport", "Sport", False),
    ("sport ", "sport", False),
    ("sport/tennis", "sport/tennis/", False),
    # [MQTT-4.7.2-1]: wildcard first levels do not see '$' names, a literal '$SYS' does.
    ("#", "$SYS", False),
    ("#", "$SYS/monitor/Clients", False),
    ("+/monitor/Clients", "$SYS/monitor/Clients", False),
    ("$SYS/#", "$SYS/monitor/Clients", True),
    ("$SYS/#", "$SYS", True),
    ("$SYS/monitor/+", "$SYS/monitor/Clients", True),
    ("+", "$x", False),
    ("a/+", "a/$x", True),
    ("a/#", "a/$x", True),
]


@pytest.mark.parametrize(("topic_filter", "name", "expected"), SPEC_EXAMPLES)
def test_spec_examples(topic_filter: str, name: str, expected: bool) -> None:
    validate_topic_filter(topic_filter)
    validate_topic_name(name)
    assert matches(topic_filter, name) is expected


@given(level_lists, st.lists(st.sampled_from(NAME_LEVELS), min_size=1, max_size=5))
def test_matches_agrees_with_recursive_reference(filter_parts: list[str], name_parts: list[str]) -> None:
    topic_filter, name = joined(filter_parts), joined(name_parts)
    try:
        validate_topic_filter(topic_filter)
        validate_topic_name(name)
    except TopicError:
        return
    assert matches(topic_filter, name) is reference_matches(filter_parts, name_parts)


# --- validation -----------------------------------------------------------------------------------------------------


@given(level_lists)
def test_filter_is_valid_exactly_when_hash_is_last(levels: list[str]) -> None:
    topic_filter = joined(levels)
    legal = topic_filter != "" and "#" not in levels[:-1]
    if legal:
        assert filter_levels(topic_filter) == levels
    else:
        with pytest.raises(TopicError):
            validate_topic_filter(topic_filter)


@given(level_lists)
def test_name_is_valid_exactly_without_wildcards(levels: list[str]) -> None:
    name = joined(levels)
    if name and "+" not in levels and "#" not in levels:
        validate_topic_name(name)
    else:
        with pytest.raises(TopicError):
            validate_topic_name(name)


@pytest.mark.parametrize(
    "topic_filter",
    ["#", "+", "/", "//", "+/+", "/+", "+/", "sport/#", "sport/+/player1", "$SYS/#", "a//b/+/#", "é/ü", " "],
)
def test_legal_filters(topic_filter: str) -> None:
    validate_topic_filter(topic_filter)


@pytest.mark.parametrize(
    ("topic_filter", "message"),
    [
        ("", "topic filter is empty"),
        ("a/#/b", "topic filter 'a/#/b': '#' must be the last level"),
        ("#/#", "topic filter '#/#': '#' must be the last level"),
        ("sport/tennis#", "'#' must be a whole level, found in level 2 'tennis#'"),
        ("sport/#tennis", "'#' must be a whole level, found in level 2 '#tennis'"),
        ("##", "'#' must be a whole level, found in level 1 '##'"),
        ("sport+", "'+' must be a whole level, found in level 1 'sport+'"),
        ("a/++/b", "'+' must be a whole level, found in level 2 '++'"),
        ("a/+b", "'+' must be a whole level, found in level 2 '+b'"),
        ("+#", "'#' must be a whole level"),
        ("a/\x00", "null character U+0000 at character 2 (level 2)"),
    ],
)
def test_illegal_filters_say_what_is_wrong(topic_filter: str, message: str) -> None:
    with pytest.raises(TopicError) as caught:
        validate_topic_filter(topic_filter)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "topic name is empty"),
        ("sport/+", "topic name 'sport/+': wildcard '+' is not allowed in a topic name (level 2)"),
        ("a/b/c#", "wildcard '#' is not allowed in a topic name (level 3)"),
        ("#", "wildcard '#'"),
        ("a\x00b", "null character U+0000 at character 1 (level 1)"),
        ("a/\ud800", "U+D800 at character 2 is a lone surrogate"),
    ],
)
def test_illegal_names_say_what_is_wrong(name: str, message: str) -> None:
    with pytest.raises(TopicError) as caught:
        validate_topic_name(name)
    assert message in str(caught.value)


@pytest.mark.parametrize("check", [validate_topic_name, validate_topic_filter])
def test_length_is_counted_in_utf8_bytes(check: Callable[[str], None]) -> None:
    check("a" * MAX_TOPIC_BYTES)
    check("é" * (MAX_TOPIC_BYTES // 2) + "a")  # 65,535 bytes in 32,768 characters
    for too_long in ("a" * (MAX_TOPIC_BYTES + 1), "é" * (MAX_TOPIC_BYTES // 2 + 1)):
        with pytest.raises(TopicError) as caught:
            check(too_long)
        message = str(caught.value)
        assert "65536 UTF-8 bytes, at most 65535 are allowed" in message
        # The message shows the start of the topic, not 64 KiB of it.
        assert len(message) < 300


def test_topic_error_is_a_value_error_of_the_gateway() -> None:
    with pytest.raises(ValueError):
        validate_topic_name("a/+")
    assert issubclass(TopicError, MqttBridgeError)


# --- shared subscriptions -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("subscription", "expected"),
    [
        ("sport/#", SharedFilter(None, "sport/#")),
        ("$share/group/sport/#", SharedFilter("group", "sport/#")),
        ("$share/g/+", SharedFilter("g", "+")),
        ("$share/g/$SYS/#", SharedFilter("g", "$SYS/#")),
        ("$share/g//", SharedFilter("g", "/")),
        ("$share/g/$share/h/x", SharedFilter("g", "$share/h/x")),
        # Only '$share/' starts a shared subscription; these are plain filters.
        ("$share", SharedFilter(None, "$share")),
        ("$shared/g/a", SharedFilter(None, "$shared/g/a")),
        ("$SHARE/g/a", SharedFilter(None, "$SHARE/g/a")),
    ],
)
def test_parse_subscription(subscription: str, expected: SharedFilter) -> None:
    assert parse_subscription(subscription) == expected


@pytest.mark.parametrize(
    ("subscription", "message"),
    [
        ("$share/", "shared subscription '$share/': the share name is empty"),
        ("$share//a", "the share name is empty"),
        ("$share/g", "no topic filter after the share name 'g'"),
        ("$share/g/", "shared subscription '$share/g/': topic filter is empty"),
        ("$share/g+/a", "the share name 'g+' contains '+'"),
        ("$share/+/a", "the share name '+' contains '+'"),
        ("$share/#/a", "the share name '#' contains '#'"),
        ("$share/g/a/#/b", "shared subscription '$share/g/a/#/b': topic filter 'a/#/b': '#' must be the last level"),
        ("$share/g\x00/a", "null character U+0000"),
        ("a/#/b", "topic filter 'a/#/b': '#' must be the last level"),
        ("", "topic filter is empty"),
    ],
)
def test_parse_subscription_rejects(subscription: str, message: str) -> None:
    with pytest.raises(TopicError) as caught:
        parse_subscription(subscription)
    assert message in str(caught.value)


def test_shared_filter_is_frozen() -> None:
    shared = SharedFilter("g", "a")
    with pytest.raises(AttributeError):
        shared.group = "h"  # type: ignore[misc]


# --- first level ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "expected"),
    [("sport/tennis/player1", "sport"), ("sport", "sport"), ("/finance", ""), ("sport/", "sport"), ("$SYS/x", "$SYS")],
)
def test_first_level(topic: str, expected: str) -> None:
    assert first_level(topic) == expected
