"""The mapping from MQTT topics to core topics is total, injective and (but for hashed names) reversible."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.store.topic_name import validate_topic
from mqtt_bridge.topics.topic_mapping import (
    ESCAPED_PREFIX,
    MAX_CORE_TOPIC_LENGTH,
    core_topic_of,
    core_topic_of_level,
    first_level_of,
)

# Any first level an MQTT topic name may have: UTF-8 text without '/', U+0000 or the wildcards.
levels = st.text(
    st.characters(exclude_characters="/+#\x00", exclude_categories=("Cs",)),
    max_size=80,
)


def reference_escape(level: str) -> str:
    """The escape written out byte by byte, as the docstring states it."""
    out = []
    for byte in level.encode("utf-8"):
        char = chr(byte)
        out.append(char if re.fullmatch(r"[A-Za-z0-9-]", char) else f"_{byte:02X}")
    return "".join(out)


@pytest.mark.parametrize(
    ("topic", "core"),
    [
        ("sensors/dev1/temp", "sensors"),
        ("a_b/c", "a_b"),
        ("x", "x"),
        ("/TopicA", "%MQTT%"),
        ("home kitchen/temp", "%MQTT%home_20kitchen"),
        ("dev.1/temp", "%MQTT%dev_2E1"),
        ("Gerät/x", "%MQTT%Ger_C3_A4t"),
        ("$SYS/broker/load", "%MQTT%_24SYS"),
        ("MQTT_SESSIONS/x", "%MQTT%MQTT_5FSESSIONS"),
        ("connect-configs/x", "%MQTT%connect-configs"),
        ("%DLQ%group/x", "%MQTT%_25DLQ_25group"),
        ("SCHEDULE_TOPIC_XXXX/x", "%MQTT%SCHEDULE_5FTOPIC_5FXXXX"),
        ("TRANS_CHECK_MAX_TIME_TOPIC", "%MQTT%TRANS_5FCHECK_5FMAX_5FTIME_5FTOPIC"),
        ("rmq_sys_wheel_timer/x", "%MQTT%rmq_5Fsys_5Fwheel_5Ftimer"),
    ],
)
def test_examples(topic: str, core: str) -> None:
    assert core_topic_of(topic) == core
    assert first_level_of(core) == topic.split("/")[0]


@given(levels)
def test_every_first_level_maps_to_a_valid_core_topic_that_gives_it_back(level: str) -> None:
    core = core_topic_of_level(level)
    assert validate_topic(core) == core
    assert len(core) <= MAX_CORE_TOPIC_LENGTH
    back = first_level_of(core)
    if back is None:  # hashed: only names too long to escape
        assert len(ESCAPED_PREFIX + reference_escape(level)) > MAX_CORE_TOPIC_LENGTH
    else:
        assert back == level
    if not core.startswith(ESCAPED_PREFIX):
        assert core == level and re.fullmatch(r"[A-Za-z0-9_-]+", level)
    else:
        expected = ESCAPED_PREFIX + reference_escape(level)
        assert core == expected or core.startswith(expected[: MAX_CORE_TOPIC_LENGTH - 17])


@given(levels, levels)
def test_distinct_first_levels_get_distinct_core_topics(one: str, two: str) -> None:
    if one != two:
        assert core_topic_of_level(one) != core_topic_of_level(two)


def test_long_first_levels_are_hashed_and_stay_distinct() -> None:
    one, two = "é" * 5000 + "a", "é" * 5000 + "b"
    assert core_topic_of_level(one) != core_topic_of_level(two)
    assert len(core_topic_of_level(one)) == MAX_CORE_TOPIC_LENGTH
    assert first_level_of(core_topic_of_level(one)) is None
    assert core_topic_of(one + "/x") == core_topic_of_level(one)
