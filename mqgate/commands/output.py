"""What the commands that speak to a running `mqgate serve` share (`mqgate admin`, `mqgate events`): how they
print (tables, whole rows off a terminal; the API's JSON with --json), the forms of their arguments (names quoted
into paths, times), and their answer to a command given without its action."""

from __future__ import annotations

import argparse
import json
import sys
import urllib.parse
from collections.abc import Callable
from typing import Any

from rich.cells import cell_len
from rich.console import JustifyMethod, OverflowMethod
from rich.table import Table

from eventbridge.errors import ReprocessError
from eventbridge.time_range import parse_time_ms
from mqgate.commands.connect import EXIT_OK, EXIT_USAGE, CliError, RestClient
from mqgate.commands.terminal import stdout_console

Action = Callable[[RestClient, argparse.Namespace], int]


def choose(parser: argparse.ArgumentParser, actions: str) -> Action:
    """The action of a command given without its sub-command: usage, and exit 2."""

    def refuse(_client: RestClient, _args: argparse.Namespace) -> int:
        parser.print_usage(sys.stderr)
        raise CliError(f"{parser.prog}: choose one of: {actions}", EXIT_USAGE)

    return refuse


def quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def time_arg(value: str, option: str) -> int:
    try:
        return parse_time_ms(value, option)
    except ReprocessError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def emit(args: argparse.Namespace, answer: Any, render: Callable[[Any], None]) -> int:
    """The answer as JSON with --json, else as `render` prints it."""
    if args.json:
        print(json.dumps(answer, indent=2, ensure_ascii=False))
    else:
        render(answer)
    return EXIT_OK


def committed_offset_cell(value: object) -> object:
    """A committed offset as a table shows it: the API's -1 (RocketMQ's "no offset committed") is `none`."""
    return "none" if value is None or (isinstance(value, int) and value < 0) else value


def cell(value: object) -> str:
    return "" if value is None else str(value)


# Columns of free text, which may wrap (or, for a body, be shortened) to fit a terminal. Every other column holds
# names and ids, which are printed whole: a message id cut to `7F000001…` cannot be copied into `message show`.
WRAPPED_COLUMNS = frozenset({"body", "reason", "note", "value", "keys", "topics", "subscriptions", "error"})
SHORTENED_COLUMNS = frozenset({"body"})
# The least width a wrapped column is counted with when deciding whether the table fits.
WRAPPED_MIN_WIDTH = 12
# A column whose every cell is this short (counts, queue numbers, permissions) needs no protection: only its
# heading wraps ("read queues" over two lines), its values never do.
SHORT_CELL = 8


def table(title: str, columns: list[str], rows: list[list[object]], right: tuple[str, ...] = ()) -> None:
    """Print a table: names and ids whole, free text wrapped to the terminal's width. When the whole names alone
    are wider than the terminal, the table is printed as wide as they need, and the terminal wraps its lines."""
    cells = [[cell(value) for value in row] for row in rows]
    shown = Table(title=title, title_justify="left")
    needed = len(columns) * 3 + 1  # a space either side of each cell, a rule between and around them
    for index, column in enumerate(columns):
        widest = max([0, *(cell_len(row[index]) for row in cells)])
        heading_word = max(cell_len(word) for word in column.split())
        justify: JustifyMethod = "right" if column in right else "left"
        if column in WRAPPED_COLUMNS:
            overflow: OverflowMethod = "ellipsis" if column in SHORTENED_COLUMNS else "fold"
            shown.add_column(column, justify=justify, overflow=overflow)
            needed += max(min(widest, WRAPPED_MIN_WIDTH), heading_word) + 1  # 1: rich's rounding as it shrinks
        elif widest <= SHORT_CELL:
            shown.add_column(column, justify=justify)
            needed += max(widest, heading_word) + 1
        else:
            shown.add_column(column, justify=justify, no_wrap=True, min_width=widest)
            needed += max(widest, cell_len(column))
    for row in cells:
        shown.add_row(*row)
    console = stdout_console()
    if console.width < needed:
        console = stdout_console(width=needed)
    console.print(shown)
