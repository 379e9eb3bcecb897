"""The modules of mqtt_bridge import each other without a cycle, counting imports made only for type checking."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mqtt_bridge"


def name_of(path: Path) -> str:
    """The module's name inside the package: `gateway`, `wire.protocol`."""
    return ".".join(path.relative_to(PACKAGE).with_suffix("").parts)


def imports_of(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mqtt_bridge."):
            found.add(node.module.removeprefix("mqtt_bridge."))
        elif isinstance(node, ast.Import):
            found |= {
                alias.name.removeprefix("mqtt_bridge.") for alias in node.names if alias.name.startswith("mqtt_bridge.")
            }
    return found


def test_no_import_cycle_between_mqtt_bridge_modules():
    graph = {name_of(path): imports_of(path) for path in PACKAGE.rglob("*.py") if path.name != "__init__.py"}
    assert graph["listener"] >= {"gateway"}  # the scan sees imports at all
    cycles = []

    def visit(module: str, path: list[str]) -> None:
        for target in sorted(graph.get(module, ())):
            if target in path:
                cycles.append(" -> ".join([*path[path.index(target) :], target]))
            elif not visited.get(target):
                visit(target, [*path, target])
        visited[module] = True

    visited: dict[str, bool] = {}
    for module in sorted(graph):
        visit(module, [module])
    assert not cycles, cycles
