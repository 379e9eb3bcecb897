"""Build the compiled modules: `python -m mqgate.compile_modules [--log PATH]` (what `make compiled` runs) compiles
the modules of pyproject.toml [tool.mqgate] compiled with mypyc, each next to its .py (build_ext --inplace).

mypyc puts the runtime the compiled modules share in one more extension module, named after their group. Its
default name is a hash at the top of the tree, which only an interpreter started in the repository finds (the
installed console script does not: the editable install maps packages, not the tree's root); named
`core.mypyc_runtime` here, it lives in the core package, which every compiled module's interpreter imports.

A first build takes minutes (mypyc's type check and C generation, then a C compiler run per module): with --log,
what mypyc and the compiler print goes to that file, and standard output shows one line per step, `module n of N`,
so that a first `make run` does not sit silent.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parent.parent
RUNTIME_GROUP = "core.mypyc_runtime"


def compiled_sources() -> list[str]:
    with open(ROOT / "pyproject.toml", "rb") as file:
        sources: list[str] = tomllib.load(file)["tool"]["mqgate"]["compiled"]
    return sources


@contextlib.contextmanager
def _output_to(log: Path | None) -> Iterator[TextIO]:
    """While the block runs, file descriptors 1 and 2 (and so mypyc, setuptools and every compiler they start) write
    to `log`; the block gets the original standard output for its progress lines. Without a log, nothing moves."""
    if log is None:
        yield sys.stdout
        return
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    progress = os.fdopen(os.dup(saved[0]), "w", buffering=1)
    with open(log, "wb") as target:
        os.dup2(target.fileno(), 1)
        os.dup2(target.fileno(), 2)
        try:
            yield progress
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            progress.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mqgate.compile_modules", description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", type=Path, help="write mypyc's and the compiler's output here; show progress only")
    args = parser.parse_args(argv)
    sources = compiled_sources()
    with _output_to(args.log) as progress:
        return _build(sources, progress)


def _build(sources: list[str], progress: TextIO) -> int:
    from mypyc.build import mypycify
    from setuptools import setup
    from setuptools.command.build_ext import build_ext

    started = time.monotonic()
    print(
        f"  mypyc: type-checking {len(sources)} modules and writing their C (a few minutes the first time)",
        file=progress,
    )
    extensions = mypycify(sources, group_name=RUNTIME_GROUP, opt_level="3")
    print(f"  mypyc: C written in {time.monotonic() - started:.0f} s; compiling it", file=progress)
    total = len(sources)
    built = 0

    class BuildWithProgress(build_ext):
        def build_extension(self, ext: Any) -> None:
            nonlocal built
            if ext.name.endswith("__mypyc"):  # the runtime the modules share, not one of them
                print(f"  shared runtime: {ext.name}", file=progress)
            else:
                built += 1
                print(f"  module {built} of {total}: {ext.name}", file=progress)
            super().build_extension(ext)

    setup(
        name="mqgate-compiled-modules",
        ext_modules=extensions,
        cmdclass={"build_ext": BuildWithProgress},
        script_args=["build_ext", "--inplace", "--build-temp", "build/mypyc"],
    )
    print(f"  compiled {total} modules in {time.monotonic() - started:.0f} s", file=progress)
    return 0


if __name__ == "__main__":
    sys.exit(main())
