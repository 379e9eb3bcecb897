"""The modules mypyc compiles (pyproject.toml [tool.mqgate] compiled), as the tests see them: which are compiled,
which compiled ones are older than their source (then Python would run stale code), and each module's pure twin,
its .py loaded as an interpreted module of its own, for property tests of compiled against interpreted."""

from __future__ import annotations

import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

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
    """Module `name` interpreted from its .py, as NAME__pure, whether or not a compiled build of it exists."""
    twin_name = name + PURE_SUFFIX
    if twin_name in sys.modules:
        return sys.modules[twin_name]
    source = ROOT.joinpath(*name.split(".")).with_suffix(".py")
    spec = importlib.util.spec_from_file_location(twin_name, source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[twin_name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module
