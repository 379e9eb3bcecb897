"""Validation of resource names: topics (which become directory names under consumequeue/, so they must be safe)
and, with the same character set, consumer groups."""

from __future__ import annotations

import re

from core.store.errors import InvalidTopicError

# RocketMQ's TopicValidator: 127 characters (the length byte of its v1 record) from [%|a-zA-Z0-9_-].
MAX_TOPIC_LENGTH = 127
_LEGAL = re.compile(r"[%|a-zA-Z0-9_-]+")
_ILLEGAL_CHAR = re.compile(r"[^%|a-zA-Z0-9_-]")


def validate_name(what: str, name: str, max_length: int, error: type[Exception]) -> str:
    """Return `name` if it is 1 to `max_length` characters from [%|a-zA-Z0-9_-], else raise `error` saying what is
    wrong; `what` names the kind of resource in the message ("topic", "consumer group")."""
    if not isinstance(name, str) or not name:
        raise error(f"{what} name is empty; give 1 to {max_length} characters from [%|a-zA-Z0-9_-]")
    if len(name) > max_length:
        raise error(f"{what} '{name[:40]}...': {len(name)} characters, at most {max_length} are allowed")
    if _LEGAL.fullmatch(name) is None:
        bad = _ILLEGAL_CHAR.search(name)
        char = bad.group() if bad else "?"
        raise error(
            f"{what} {name!r}: {char!r} is not allowed in a {what} name; use letters, digits, '%', '|', '_' or '-'"
        )
    return name


def validate_topic(topic: str) -> str:
    """Return `topic` if it is a legal name, else raise InvalidTopicError saying what is wrong."""
    return validate_name("topic", topic, MAX_TOPIC_LENGTH, InvalidTopicError)
