"""Whether a benchmark ran on the modules mypyc compiles (pyproject.toml [tool.mqgate] compiled): the
`<bench>.compiled=` line every benchmark prints, so that a figure says which build it measured."""

from __future__ import annotations

import importlib
from pathlib import Path

from mqgate.compile_modules import compiled_sources


def compiled_state(package: str = "") -> str:
    """ "1" when every listed module under `package` (a dotted prefix; "" for all) is imported compiled, "0" when
    none is, "partial" otherwise."""
    names = [".".join(Path(source).with_suffix("").parts) for source in compiled_sources()]
    states = {
        Path(importlib.import_module(name).__file__ or "").suffix not in (".py", ".pyc")
        for name in names
        if name.startswith(package)
    }
    if states == {True}:
        return "1"
    return "0" if states in ({False}, set()) else "partial"
