"""Where the CLI's output goes: a rich Console for standard output that prints whole rows, and the progress shown
on a terminal while long operations run.

Rich sizes a console to the terminal, and to 80 columns when standard output is not one (a pipe, a file, a test's
capture): a wide table piped into grep or less was cut at column 80, its cells wrapped or ellipsised. Off a
terminal the console here is as wide as any row needs (MAX_PIPE_WIDTH), so each row stays one line, whole, for the
tools that read it; `--json` remains the form for scripts that parse.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

# Columns a row may take off a terminal: wider than any row the CLI prints (message bodies are cut before this).
MAX_PIPE_WIDTH = 10_000


class _StdoutConsole(Console):
    """Rich ends the process with exit code 1 when its reader has gone (`... | head`); here the BrokenPipeError goes
    on to `mqgate.cli.main`, which ends every command alike whether rich or print() met the closed pipe."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def stdout_console(file: TextIO | None = None, width: int | None = None) -> Console:
    """A console on `file` (standard output by default): the terminal's width (or `width`) on a terminal, whole rows
    elsewhere."""
    stream = file if file is not None else sys.stdout
    if stream.isatty():
        if width is None:
            return _StdoutConsole(file=stream)
        # Rich takes a width given alone only with a height beside it (on a "dumb" terminal it would keep 80).
        return _StdoutConsole(file=stream, width=width, height=Console(file=stream).height)
    return _StdoutConsole(file=stream, width=MAX_PIPE_WIDTH, soft_wrap=True)


@contextlib.contextmanager
def progress_bar(description: str, total: int | None, enabled: bool = True) -> Iterator[Callable[[int], None]]:
    """A progress bar on standard error while the block runs, when that is a terminal (and `enabled`): yields a
    function that advances it by N steps of `total` (None: steps of unknown number, shown as a pulse with the
    count). Off a terminal nothing is drawn and the function does nothing, so scripts and logs stay clean."""
    console = Console(stderr=True)
    if not (enabled and console.is_terminal):
        yield lambda _steps: None
        return
    columns = [
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    ]
    with Progress(*columns, console=console, transient=False) as progress:
        task = progress.add_task(description, total=total)
        yield lambda steps: progress.advance(task, steps)


@contextlib.contextmanager
def working(description: str, enabled: bool = True) -> Iterator[None]:
    """A spinner with the time elapsed on standard error while one long request runs (a replay, a redrive), when
    that is a terminal: the server answers once, at the end, so there is no count to show."""
    console = Console(stderr=True)
    if not (enabled and console.is_terminal):
        yield
        return
    with console.status(description):
        yield
