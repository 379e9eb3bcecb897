"""Reading a YAML node tree as configuration: every value checked at its node, and every error a RuleFileError
that names the file, line and column (`file:line:column: reason`). Rule files use it; it knows nothing of rules."""

from __future__ import annotations

import difflib
import enum
import math
import re
from collections.abc import Sequence
from typing import Any, TypeVar

from yaml.constructor import ConstructorError, SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from eventbridge.errors import RuleFileError
from eventbridge.rules.model import SourcePosition

_E = TypeVar("_E", bound=enum.Enum)

# YAML aliases let a few lines expand into billions of values ("billion laughs"); a pattern or constant has at
# most this many values once aliases are expanded. AWS caps a whole pattern at 2,048 characters.
MAX_JSON_VALUE_NODES = 10_000
_JSON_SCALAR_TAGS = frozenset(f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null"))


class NodeReader:
    """Reads one rule file's node tree, raising RuleFileError at the offending node."""

    def __init__(self, path: str) -> None:
        self.path = path

    def position(self, node: Node) -> SourcePosition:
        return SourcePosition(self.path, node.start_mark.line + 1, node.start_mark.column + 1)

    def error(self, node: Node, reason: str, *, line_offset: int = 0) -> RuleFileError:
        pos = self.position(node)
        return RuleFileError(self.path, pos.line + line_offset, pos.column, reason)

    def mapping(
        self, node: Node, what: str, allowed: Sequence[str], required: Sequence[str] = ()
    ) -> dict[str, tuple[Node, Node]]:
        if not isinstance(node, MappingNode):
            raise self.error(node, f"{what} must be a mapping")
        seen: dict[str, tuple[Node, Node]] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, ScalarNode) or key_node.tag != "tag:yaml.org,2002:str":
                raise self.error(key_node, f"{what}: keys must be strings")
            key = key_node.value
            if key in seen:
                raise self.error(key_node, f"{what}: {key!r} given twice")
            if key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(allowed)}"
                raise self.error(key_node, f"{what}: unknown key {key!r}{hint}")
            seen[key] = (key_node, value_node)
        for key in required:
            if key not in seen:
                raise self.error(node, f"{what}: {key!r} is missing")
        return seen

    def sequence(self, node: Node, what: str) -> list[Node]:
        if not isinstance(node, SequenceNode):
            raise self.error(node, f"{what} must be a list")
        return list(node.value)

    def scalar(self, node: Node, what: str, tag: str, kind: str) -> Any:
        if not isinstance(node, ScalarNode) or node.tag != f"tag:yaml.org,2002:{tag}":
            raise self.error(node, f"{what} must be {kind}")
        return SafeConstructor().construct_object(node)

    def string(self, node: Node, what: str, pattern: re.Pattern[str] | None = None, rule: str = "") -> str:
        value: str = self.scalar(node, what, "str", "a string")
        if pattern is not None and pattern.fullmatch(value) is None:
            raise self.error(node, f"{what} {value!r}: {rule}")
        if not value:
            raise self.error(node, f"{what} is empty")
        return value

    def integer(self, node: Node, what: str, low: int, high: int) -> int:
        value: int = self.scalar(node, what, "int", "an integer")
        if not low <= value <= high:
            raise self.error(node, f"{what} is {value}; give an integer from {low} to {high}")
        return value

    def number(self, node: Node, what: str) -> float:
        if isinstance(node, ScalarNode) and node.tag == "tag:yaml.org,2002:int":
            return float(self.integer(node, what, 0, 10**12))
        value: float = self.scalar(node, what, "float", "a number")
        if not math.isfinite(value) or value < 0:
            raise self.error(node, f"{what} is {value}; give a finite number, 0 or more")
        return value

    def boolean(self, node: Node, what: str) -> bool:
        value: bool = self.scalar(node, what, "bool", "true or false")
        return value

    def enum_value(self, node: Node, what: str, enum_type: type[_E]) -> _E:
        text = self.scalar(node, what, "str", "a string")
        for member in enum_type:
            if member.value == text:
                return member
        choices = ", ".join(str(m.value) for m in enum_type)
        raise self.error(node, f"{what} {text!r} is not one of {choices}")

    def json_value(self, node: Node, what: str) -> Any:
        """A JSON-compatible value: refuses YAML-only types (timestamps, binary, sets) at their node, and values
        that aliases expand beyond MAX_JSON_VALUE_NODES."""
        budget = [MAX_JSON_VALUE_NODES]
        return self._json_value(node, what, budget)

    def _json_value(self, node: Node, what: str, budget: list[int]) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise self.error(node, f"{what}: more than {MAX_JSON_VALUE_NODES} values (aliases included)")
        if isinstance(node, MappingNode):
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag != "tag:yaml.org,2002:str":
                    raise self.error(key_node, f"{what}: keys must be strings (quote {key_node.value!r}?)")
                if key_node.value in out:
                    raise self.error(key_node, f"{what}: {key_node.value!r} given twice")
                out[key_node.value] = self._json_value(value_node, what, budget)
            return out
        if isinstance(node, SequenceNode):
            return [self._json_value(item, what, budget) for item in node.value]
        if not isinstance(node, ScalarNode) or node.tag not in _JSON_SCALAR_TAGS:
            raise self.error(node, f"{what}: {node.tag} is not a JSON value; quote it to make it a string")
        try:
            value = SafeConstructor().construct_object(node)
        except ConstructorError as exc:
            raise self.error(node, f"{what}: {exc.problem}") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise self.error(node, f"{what}: {node.value!r} is not a JSON number")
        return value
