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

from rich.table import Table

from eventbridge.errors import ReprocessError
from eventbridge.time_range import parse_time_ms
from mqgate.connect_cli import EXIT_OK, EXIT_USAGE, CliError, RestClient
from mqgate.terminal_output import stdout_console

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


def cell(value: object) -> str:
    return "" if value is None else str(value)


def table(title: str, columns: list[str], rows: list[list[object]], right: tuple[str, ...] = ()) -> None:
    shown = Table(title=title, title_justify="left")
    for column in columns:
        shown.add_column(column, justify="right" if column in right else "left")
    for row in rows:
        shown.add_row(*(cell(value) for value in row))
    stdout_console().print(shown)
