"""Build the compiled modules: `python -m mqgate.compile_modules` (what `make compiled` runs) compiles the modules
of pyproject.toml [tool.mqgate] compiled with mypyc, each next to its .py (build_ext --inplace).

mypyc puts the runtime the compiled modules share in one more extension module, named after their group. Its
default name is a hash at the top of the tree, which only an interpreter started in the repository finds (the
installed console script does not: the editable install maps packages, not the tree's root); named
`core.mypyc_runtime` here, it lives in the core package, which every compiled module's interpreter imports.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_GROUP = "core.mypyc_runtime"


def compiled_sources() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as file:
        sources: list[str] = tomllib.load(file)["tool"]["mqgate"]["compiled"]
    return sources


def main() -> int:
    from mypyc.build import mypycify
    from setuptools import setup

    setup(
        name="mqgate-compiled-modules",
        ext_modules=mypycify(compiled_sources(), group_name=RUNTIME_GROUP, opt_level="3"),
        script_args=["build_ext", "--inplace", "--build-temp", "build/mypyc"],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
