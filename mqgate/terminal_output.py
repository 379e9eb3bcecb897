"""Where the CLI's tables go: a rich Console for standard output that prints whole rows.

Rich sizes a console to the terminal, and to 80 columns when standard output is not one (a pipe, a file, a test's
capture): a wide table piped into grep or less was cut at column 80, its cells wrapped or ellipsised. Off a
terminal the console here is as wide as any row needs (MAX_PIPE_WIDTH), so each row stays one line, whole, for the
tools that read it; `--json` remains the form for scripts that parse.
"""

from __future__ import annotations

import sys
from typing import TextIO

from rich.console import Console

# Columns a row may take off a terminal: wider than any row the CLI prints (message bodies are cut before this).
MAX_PIPE_WIDTH = 10_000


def stdout_console(file: TextIO | None = None) -> Console:
    """A console on `file` (standard output by default): the terminal's width on a terminal, whole rows
    elsewhere."""
    stream = file if file is not None else sys.stdout
    if stream.isatty():
        return Console(file=stream)
    return Console(file=stream, width=MAX_PIPE_WIDTH, soft_wrap=True)
