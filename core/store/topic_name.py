"""Validation of topic names. A topic name becomes a directory name under consumequeue/, so it must be safe."""

from __future__ import annotations

import re

from core.store.errors import InvalidTopicError

# RocketMQ's TopicValidator: 127 characters (the length byte of its v1 record) from [%|a-zA-Z0-9_-].
MAX_TOPIC_LENGTH = 127
_LEGAL = re.compile(r"[%|a-zA-Z0-9_-]+")
_ILLEGAL_CHAR = re.compile(r"[^%|a-zA-Z0-9_-]")


def validate_topic(topic: str) -> str:
    """Return `topic` if it is a legal name, else raise InvalidTopicError saying what is wrong."""
    if not isinstance(topic, str) or not topic:
        raise InvalidTopicError("topic name is empty; give 1 to 127 characters from [%|a-zA-Z0-9_-]")
    if len(topic) > MAX_TOPIC_LENGTH:
        raise InvalidTopicError(
            f"topic '{topic[:40]}...': {len(topic)} characters, at most {MAX_TOPIC_LENGTH} are allowed"
        )
    if _LEGAL.fullmatch(topic) is None:
        bad = _ILLEGAL_CHAR.search(topic)
        char = bad.group() if bad else "?"
        raise InvalidTopicError(
            f"topic {topic!r}: {char!r} is not allowed in a topic name; use letters, digits, '%', '|', '_' or '-'"
        )
    return topic
