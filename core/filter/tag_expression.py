"""TAG subscriptions: `*` or `TagA || TagB`, as RocketMQ's SubscriptionData builds them.

A message carries at most one tag (the `TAGS` property); its consume-queue entry carries `tags_code(tag)`. A TAG
subscription is checked twice, as in RocketMQ: `matches_code` on the consume-queue entry skips most unwanted
messages without reading the commit log, and `matches` on the message itself drops the few whose tag only
collides in hash.

    TagFilter.parse(None), TagFilter.parse(""), TagFilter.parse("*")  -> every message, tagged or not
    TagFilter.parse("TagA || TagB")                                  -> messages tagged exactly TagA or TagB
    TagFilter.parse("TagA || || TagB")                               -> FilterExpressionError at position 8

Where RocketMQ silently drops empty parts, we refuse them: `"A || "` is more likely a typo than a wish.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.filter.errors import FilterExpressionError
from core.filter.message_filter import FilterableMessage
from core.store.message import tags_code

SUBSCRIBE_ALL_EXPRESSION = "*"
TAG_SEPARATOR = "||"
_KIND = "TAG"


@dataclass(frozen=True, slots=True)
class TagFilter:
    """A parsed TAG expression. Build it with `TagFilter.parse`."""

    expression: str | None
    subscribe_all: bool
    tags: frozenset[str]
    codes: frozenset[int]

    @classmethod
    def parse(cls, expression: str | None) -> TagFilter:
        if expression is None or expression.strip() in ("", SUBSCRIBE_ALL_EXPRESSION):
            return cls(expression, True, frozenset(), frozenset())
        tags = _split_tags(expression)
        return cls(expression, False, frozenset(tags), frozenset(tags_code(tag) for tag in tags))

    def matches_code(self, code: int) -> bool:
        """The fast check on a consume-queue entry. True may be a hash collision; `matches` settles it."""
        return self.subscribe_all or code in self.codes

    def matches(self, tags: str | None) -> bool:
        """The exact check on a message's tag."""
        return self.subscribe_all or (tags is not None and tags in self.tags)

    def matches_message(self, message: FilterableMessage) -> bool:
        return self.matches(message.tags)


def _split_tags(expression: str) -> list[str]:
    tags = []
    start = 0
    while True:
        separator = expression.find(TAG_SEPARATOR, start)
        end = len(expression) if separator < 0 else separator
        part = expression[start:end]
        tag = part.strip()
        tag_start = start + len(part) - len(part.lstrip())
        if not tag:
            _refuse_empty(expression, start, end)
        _check_tag(expression, tag, tag_start)
        tags.append(tag)
        if separator < 0:
            return tags
        start = separator + len(TAG_SEPARATOR)


def _refuse_empty(expression: str, start: int, end: int) -> None:
    if end == len(expression):
        reason = "expected a tag after '||' (got end of expression); remove the trailing '||'"
    elif start == 0:
        reason = "expected a tag before '||'; remove the leading '||'"
    else:
        reason = "expected a tag between two '||' (got '||'); remove one of them"
    raise FilterExpressionError(_KIND, expression, end, reason)


def _check_tag(expression: str, tag: str, tag_start: int) -> None:
    for index, char in enumerate(tag):
        if char.isspace():
            raise FilterExpressionError(
                _KIND,
                expression,
                tag_start + index,
                f"tag {tag!r} contains whitespace; tags are single words, separate several with '||'",
            )
        if char == "|":
            raise FilterExpressionError(
                _KIND,
                expression,
                tag_start + index,
                f"tag {tag!r} contains '|'; separate tags with '||' (two bars)",
            )
    if tag == SUBSCRIBE_ALL_EXPRESSION:
        raise FilterExpressionError(
            _KIND,
            expression,
            tag_start,
            "'*' subscribes to every tag and must stand alone; drop the other tags or the '*'",
        )
