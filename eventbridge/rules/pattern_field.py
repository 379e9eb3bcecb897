"""An event pattern as a field of a rule file (a rule's `pattern`, an archive's): read from its YAML node, checked by
the pattern compiler when the file loads, and refused at the node inside the pattern that is wrong.

Rules and archives take the same patterns and must refuse the same mistakes at the same places, so the reading is
here once rather than in each of their readers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from yaml.nodes import MappingNode, Node, SequenceNode

from eventbridge.rules.model import RulePattern
from eventbridge.rules.node_reader import NodeReader

# HOOK(pattern compiler): the pattern compiler (eventbridge/pattern*.py) is called here, at load, so that a bad
# pattern refuses its file like any other bad field. It receives the pattern as parsed JSON and raises ValueError
# to refuse it; if the exception has a `path` attribute (a dotted path such as `detail.temp[0].numeric`, as
# eventbridge.patterns.errors.PatternError carries, or a sequence of keys and indexes), the error points at that
# node inside the pattern, else at the pattern itself. The loader keeps only the parsed JSON: the
# matcher is built from the RuleSet by its owner.
PatternCompileHook = Callable[[Mapping[str, Any]], object]


def read_pattern(reader: NodeReader, node: Node, where: str, compile_pattern: PatternCompileHook | None) -> RulePattern:
    """The pattern written at `node`: a non-empty mapping of JSON values that the compiler accepts."""
    if not isinstance(node, MappingNode) or not node.value:
        raise reader.error(node, f"{where}: pattern must be a non-empty mapping")
    pattern = RulePattern(reader.json_value(node, f"{where}: pattern"), reader.position(node))
    if compile_pattern is not None:
        try:
            compile_pattern(pattern.value)
        except ValueError as exc:
            raise reader.error(_node_at(node, getattr(exc, "path", ())), f"{where}: pattern: {exc}") from None
    return pattern


_PATH_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _path_steps(path: object) -> list[object]:
    """`detail.temp[0].numeric` -> ["detail", "temp", 0, "numeric"]; a sequence is taken as it is."""
    if isinstance(path, str):
        return [key if key else int(index) for key, index in _PATH_STEP.findall(path)]
    if isinstance(path, Sequence):
        return list(path)
    return []


def _node_at(node: Node, path: object) -> Node:
    """The deepest node reachable along `path` (mapping keys and list indexes) from `node`."""
    for step in _path_steps(path):
        if isinstance(node, MappingNode):
            match = [value for key, value in node.value if key.value == step]
            if not match:
                break
            node = match[0]
        elif isinstance(node, SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
            node = node.value[step]
        else:
            break
    return node
