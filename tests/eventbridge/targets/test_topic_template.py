"""MQTT targets' topic templates: compiled at load (refusing what could never be a topic name), rendered per event
(refusing values that would add levels or wildcards), against a plain reference renderer."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eventbridge.errors import TransformRenderError
from eventbridge.targets.topic_template import TopicTemplateError, compile_topic_template, render_topic

EVENT = {"id": "e1", "data": {"device": "d7", "n": 3, "on": True, "list": ["a", "b"], "bad": "x/y", "empty": ""}}


@pytest.mark.parametrize(
    ("template", "topic"),
    [
        ("alerts", "alerts"),
        ("devices/${$.data.device}/cmd", "devices/d7/cmd"),
        ("n/${$.data.n}/${$.data.on}", "n/3/true"),
        ("${$.id}", "e1"),
        ("a{b}/${$.id}-x", "a{b}/e1-x"),
    ],
)
def test_renders_the_event_s_values_into_the_topic(template: str, topic: str) -> None:
    assert render_topic(compile_topic_template(template), EVENT) == topic


@pytest.mark.parametrize(
    ("template", "reason"),
    [
        ("a/+/b", "wildcard '+'"),
        ("a/#", "wildcard '#'"),
        ("", "topic name"),
        ("a/${$.[}", "JSONPath"),
        ("a/${$.x", "not closed"),
        ("a/\x00", "U+0000"),
    ],
)
def test_a_template_that_can_never_be_a_topic_is_refused(template: str, reason: str) -> None:
    with pytest.raises(TopicTemplateError) as refused:
        compile_topic_template(template)
    assert reason in str(refused.value)


@pytest.mark.parametrize(
    ("template", "reason"),
    [
        ("d/${$.data.missing}", "matched nothing"),
        ("d/${$.data.list[*]}", "matched 2 values"),
        ("d/${$.data}", "matched a dict"),
        ("d/${$.data.bad}", "holds '/'"),
        ("d/${$.data.empty}", "is empty"),
    ],
)
def test_an_event_without_a_usable_value_is_a_render_error(template: str, reason: str) -> None:
    with pytest.raises(TransformRenderError) as refused:
        render_topic(compile_topic_template(template), EVENT)
    assert reason in str(refused.value)


_LITERAL = st.text(st.characters(blacklist_characters="${}+#\x00", blacklist_categories=("Cs",)), max_size=8)
_KEY = st.sampled_from(["a", "b", "c"])
_VALUE = st.one_of(
    st.text(st.characters(blacklist_characters="/+#\x00", blacklist_categories=("Cs",)), min_size=1, max_size=6),
    st.integers(-1000, 1000),
)


@given(
    st.lists(st.one_of(_LITERAL.map(lambda text: ("text", text)), _KEY.map(lambda key: ("path", key))), max_size=6),
    st.fixed_dictionaries({"a": _VALUE, "b": _VALUE, "c": _VALUE}),
)
def test_rendering_agrees_with_plain_substitution(parts: list[tuple[str, str]], data: dict[str, Any]) -> None:
    text = "".join(value if kind == "text" else "${$.data." + value + "}" for kind, value in parts)
    expected = "".join(value if kind == "text" else str(data[value]) for kind, value in parts)
    if not expected:
        with pytest.raises(TopicTemplateError):
            compile_topic_template(text)
        return
    assert render_topic(compile_topic_template(text), {"data": data}) == expected
