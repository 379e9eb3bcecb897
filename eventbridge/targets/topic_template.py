"""The MQTT topic of an MQTT target: a topic name in which `${<JSONPath>}` stands for a value of the event, as AWS
IoT's substitution templates do (`devices/${$.data.device}/commands`). Pure.

Compiled when the rule is loaded: the literal text must be part of a legal topic name (no `+`, `#` or U+0000) and
each path must parse, so a rule that could never publish is refused with its file position. Rendered per event:
each path must match one string, integer or boolean, and the value may not hold `/`, `+`, `#` or U+0000 (a value
cannot add levels or wildcards to the topic); otherwise the event cannot be published, which is a render error
(dead-lettered with the reason, never retried: the same event renders the same way again).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from eventbridge.errors import EventBridgeError, TransformRenderError
from eventbridge.json_path import JsonPath, JsonPathSyntaxError
from eventbridge.rules.model import MqttTopicTemplate

# The MQTT topic-name grammar, pure (no I/O, no gateway).
from mqtt_bridge.topics.topic import TopicError, validate_topic_name

_PLACEHOLDER = re.compile(r"\$\{([^}]*)\}")
_FORBIDDEN_IN_VALUE = ("/", "+", "#", "\x00")


class TopicTemplateError(EventBridgeError, ValueError):
    """The template cannot be compiled; the message says what to change."""


def compile_topic_template(text: str) -> MqttTopicTemplate:
    parts: list[str | JsonPath] = []
    position = 0
    for match in _PLACEHOLDER.finditer(text):
        if match.start() > position:
            parts.append(text[position : match.start()])
        try:
            parts.append(JsonPath.compile(match.group(1)))
        except JsonPathSyntaxError as exc:
            raise TopicTemplateError(f"${{{match.group(1)}}}: {exc}") from None
        position = match.end()
    if position < len(text):
        parts.append(text[position:])
    literal = "".join(part if isinstance(part, str) else "x" for part in parts)
    if "${" in literal:
        raise TopicTemplateError("'${' opens a placeholder that is not closed with '}'")
    try:
        validate_topic_name(literal)
    except TopicError as exc:
        raise TopicTemplateError(str(exc)) from None
    return MqttTopicTemplate(text, tuple(parts))


def render_topic(template: MqttTopicTemplate, event: Mapping[str, Any]) -> str:
    """The topic name for `event`; TransformRenderError when a placeholder has no usable value."""
    if len(template.parts) == 1 and isinstance(template.parts[0], str):
        return template.parts[0]
    pieces: list[str] = []
    for part in template.parts:
        if isinstance(part, str):
            pieces.append(part)
            continue
        values = part.find(event)
        if len(values) != 1:
            found = "nothing" if not values else f"{len(values)} values"
            raise TransformRenderError(f"MQTT topic ${{{part.text}}}: matched {found}; it must match one value")
        value = values[0]
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int | str):
            text = str(value)
        else:
            raise TransformRenderError(
                f"MQTT topic ${{{part.text}}}: matched a {type(value).__name__}; "
                "it must be a string, integer or boolean"
            )
        if not text or any(ch in text for ch in _FORBIDDEN_IN_VALUE):
            raise TransformRenderError(
                f"MQTT topic ${{{part.text}}}: value {text!r} is empty or holds '/', '+', '#' or U+0000"
            )
        pieces.append(text)
    topic = "".join(pieces)
    try:
        validate_topic_name(topic)
    except TopicError as exc:
        raise TransformRenderError(f"MQTT topic: {exc}") from None
    return topic
