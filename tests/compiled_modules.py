"""The modules mypyc compiles (pyproject.toml [tool.mqgate] compiled), as the tests see them: which are compiled,
which compiled ones are older than their source (then Python would run stale code), and each module's pure twin,
its .py loaded as an interpreted module of its own, for property tests of compiled against interpreted."""

from __future__ import annotations

import ast
import importlib
import importlib.machinery
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from mqgate import compile_modules

ROOT = Path(__file__).resolve().parents[1]
PURE_SUFFIX = "__pure"


def compiled_sources() -> list[Path]:
    return [ROOT / name for name in compile_modules.compiled_sources()]


def module_name(source: Path) -> str:
    return ".".join(source.relative_to(ROOT).with_suffix("").parts)


def extension_of(source: Path) -> Path | None:
    """The compiled module built from `source` (next to it), if there is one."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = source.with_name(source.stem + suffix)
        if candidate.exists():
            return candidate
    return None


def stale() -> list[str]:
    """Compiled modules older than their .py: importing would run the old code."""
    return [
        str(source.relative_to(ROOT))
        for source in compiled_sources()
        if (built := extension_of(source)) is not None and source.stat().st_mtime > built.stat().st_mtime
    ]


def is_compiled(name: str) -> bool:
    """Whether the imported module `name` is a compiled extension (not its .py)."""
    module = importlib.import_module(name)
    return Path(module.__file__ or "").suffix not in (".py", ".pyc")


def pure_twin(name: str) -> ModuleType:
    """Module `name` interpreted from its .py, as NAME__pure, whether or not a compiled build of it exists.

    What it imports of ours that is compiled, or imports something compiled, is a pure twin too, so that no compiled
    code of ours runs under it: the twin of eventbridge.patterns.matcher compiles its patterns with a twin of
    eventbridge.patterns.compiler (interpreted, but it builds the operators the matcher dispatches on), which builds
    them from the twin of eventbridge.patterns.operators. Modules that reach nothing compiled (errors.py) are shared.
    """
    twin_name = name + PURE_SUFFIX
    if twin_name in sys.modules:
        return sys.modules[twin_name]
    source = _source_of(name)
    assert source is not None, f"{name}: no such module in the repository"
    twins = {imported: pure_twin(imported) for imported in _imports_of(source) if _reaches_compiled(imported)}
    spec = importlib.util.spec_from_file_location(twin_name, source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # The twin's imports find the twins in sys.modules, for as long as it runs its module body.
    replaced = {imported: sys.modules.get(imported) for imported in twins}
    sys.modules.update(twins)
    sys.modules[twin_name] = module  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[twin_name]
        raise
    finally:
        for imported, original in replaced.items():
            if original is None:
                del sys.modules[imported]
            else:
                sys.modules[imported] = original
    return module


def _source_of(name: str) -> Path | None:
    """The .py of module `name` in the repository, None if it is not one of ours (a package is not a module here)."""
    source = ROOT.joinpath(*name.split(".")).with_suffix(".py")
    return source if source.is_file() else None


def _imports_of(source: Path) -> list[str]:
    """The modules of ours that the module body of `source` imports (not those under `if TYPE_CHECKING:`)."""
    imported: list[str] = []
    for statement in ast.parse(source.read_text()).body:
        if isinstance(statement, ast.Import):
            candidates = [alias.name for alias in statement.names]
        elif isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
            # `from package import module` imports a module too.
            candidates = [statement.module, *(f"{statement.module}.{alias.name}" for alias in statement.names)]
        else:
            continue
        imported.extend(candidate for candidate in candidates if _source_of(candidate) is not None)
    return imported


def _reaches_compiled(name: str, seen: frozenset[str] = frozenset()) -> bool:
    """Whether module `name` is compiled or imports, directly or not, a compiled module."""
    if name in {module_name(source) for source in compiled_sources()}:
        return True
    source = _source_of(name)
    if source is None or name in seen:
        return False
    return any(_reaches_compiled(imported, seen | {name}) for imported in _imports_of(source))


def outcome(call: Callable[..., Any], *args: Any) -> tuple[Any, ...]:
    """The result of `call(*args)`, or its error by class name and message: a twin defines its own error classes
    when the module that holds them reaches compiled code, so classes are compared by name."""
    try:
        return ("result", call(*args))
    except Exception as exc:
        return ("error", type(exc).__name__, str(exc))
