"""The layers of mqgate, checked on the source (README, Layout): front doors use only what `core/__init__.py` exports,
core/store knows nothing above it, and core knows no front door."""

import ast
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import core

ROOT = Path(__file__).resolve().parents[1]
FRONT_DOORS = [
    "connectors", "eventbridge", "spark_sink", "mqgate", "mqtt_bridge", "proxy", "acl",
    "remoting", "broker_remoting", "namesrv", "remote_client", "peers", "controller",
]  # fmt: skip
ABOVE_CORE = set(FRONT_DOORS)


def imports(package: str) -> Iterator[tuple[str, int, str, list[str]]]:
    """(file:line, line, imported module, names taken from it) for every import in `package`, at any depth."""
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        where = path.relative_to(ROOT)
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    yield f"{where}:{node.lineno}", node.lineno, alias.name, []
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                yield f"{where}:{node.lineno}", node.lineno, node.module, [alias.name for alias in node.names]


def test_front_doors_import_only_what_core_exports():
    exported = set(core.__all__)
    wrong = []
    for package in FRONT_DOORS:
        for where, _, module, names in imports(package):
            if module.startswith("core."):
                wrong.append(f"{where}: imports {module}; import from `core` instead")
            elif module == "core":
                wrong += [f"{where}: `core` does not export {name}" for name in names if name not in exported]
    assert not wrong, "\n".join(wrong)


def test_the_check_finds_an_import_of_a_core_module():
    # core's own modules import each other: the scan must see such imports (or the test above proves nothing).
    assert any(module.startswith("core.store") for _, _, module, _ in imports("core"))


def test_core_store_imports_nothing_of_core_above_it():
    def above_the_store(module: str) -> bool:
        top = module.split(".")[0]
        in_store = module == "core.store" or module.startswith("core.store.")
        return top in ABOVE_CORE or (top == "core" and not in_store)

    wrong = [f"{where}: imports {module}" for where, _, module, _ in imports("core/store") if above_the_store(module)]
    assert not wrong, "\n".join(wrong)


def test_core_imports_no_front_door():
    wrong = [
        f"{where}: imports {module}" for where, _, module, _ in imports("core") if module.split(".")[0] in ABOVE_CORE
    ]
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize(
    "module", ["core.store.message_store", "core.store.message", "core.errors", "core.filter", "core.client"]
)
def test_a_core_module_imported_first_imports_without_a_cycle(module):
    # `core/__init__.py` imports the broker, so importing any core module runs it first: it must not need the module
    # being imported to be complete.
    done = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_front_doors_reach_no_broker_internals():
    # The broker's tables (topics, offsets, consumers) and its store are its own: front doors use its methods and
    # its services (queries, admin, transactions, queue_locks).
    wrong = []
    for package in FRONT_DOORS:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if (
                    isinstance(node, ast.Attribute)
                    and node.attr in ("topics", "offsets", "store", "consumers")
                    and isinstance(node.value, ast.Attribute)
                    and node.value.attr in ("broker", "_broker")
                ):
                    wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: broker.{node.attr}")
    assert not wrong, "\n".join(wrong)


def _core_module_imports() -> dict[str, set[str]]:
    """For each module of core, the modules of core it imports (TYPE_CHECKING imports included)."""
    modules = {}
    for path in sorted((ROOT / "core").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    edges: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module)
                found.update(f"{node.module}.{alias.name}" for alias in node.names)
        edges[name] = {module for module in found if module in modules and module != name}
    return edges


def test_the_broker_s_services_do_not_import_the_broker():
    # broker.py imports its services (delay levels, timers, transactions, dead letters, queries, admin); they know
    # the broker only as a Protocol of what they use (ParkingBroker, DeadLetterBroker, ...), so no module the broker
    # reaches imports it back, not even for a type.
    edges = _core_module_imports()
    reached, todo = set(), list(edges["core.broker"])
    while todo:
        module = todo.pop()
        if module not in reached:
            reached.add(module)
            todo.extend(edges[module])
    wrong = sorted(module for module in reached if "core.broker" in edges[module])
    assert not wrong, f"imported by core.broker (directly or not) and importing it back: {wrong}"
