"""JSONPath expressions over a CloudEvent in its structured JSON form, compiled once with jsonpath-ng.

Used by PART and TEMPLATE transforms and by event-derived HTTP headers. An expression is parsed when the rule is
loaded; evaluating it never parses again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonpath_ng import parse as _parse_jsonpath

from eventbridge.errors import EventBridgeError


class JsonPathSyntaxError(EventBridgeError, ValueError):
    """The expression is not valid JSONPath."""


@dataclass(frozen=True, slots=True)
class JsonPath:
    """A compiled JSONPath. Equality is that of the source text, so two loads of the same rule compare equal."""

    text: str
    _compiled: Any = field(compare=False, repr=False)

    @classmethod
    def compile(cls, text: str) -> JsonPath:
        if not text.strip():
            raise JsonPathSyntaxError("empty JSONPath; write e.g. '$.data.id'")
        try:
            compiled = _parse_jsonpath(text)
        except Exception as exc:  # jsonpath-ng raises plain Exception (and others) on syntax errors
            raise JsonPathSyntaxError(f"invalid JSONPath {text!r}: {exc}") from None
        return cls(text, compiled)

    def find(self, event: Mapping[str, Any]) -> list[Any]:
        """Every value the expression matches, in document order (empty when nothing matches)."""
        return [match.value for match in self._compiled.find(event)]

    def find_value(self, event: Mapping[str, Any]) -> Any:
        """The one matched value, a list when several match, None when nothing does."""
        values = self.find(event)
        if not values:
            return None
        return values[0] if len(values) == 1 else values
