"""`mqgate rules test PATTERN_FILE EVENT_FILE`: does an event match an EventBridge pattern (as AWS TestEventPattern)?

Both files are JSON (``-`` reads standard input, for one of them). Answers with grep's exit codes: prints
``match`` and exits 0, prints ``no match`` and exits 1; an unreadable file, an invalid pattern (with its path in
the pattern and the reason) or an event that is not a JSON object exits 2 with the reason on stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from eventbridge.matcher import Matcher
from eventbridge.pattern_compiler import compile_pattern_json
from eventbridge.pattern_errors import PatternError

EXIT_MATCH = 0
EXIT_NO_MATCH = 1
EXIT_INVALID = 2

RULES_EPILOG = """\
exit codes (as grep): 0 match, 1 no match, 2 an invalid pattern or event, or a file that cannot be read

example:
  mqgate rules test examples/pattern.json examples/event.json"""


def add_rules_parser(commands: Any, formatter: type[argparse.HelpFormatter]) -> None:
    rules = commands.add_parser(
        "rules",
        formatter_class=formatter,
        help="EventBridge rules: test a pattern against an event",
        description="EventBridge rules from the command line.",
    )
    rules_commands = rules.add_subparsers(dest="rules_command", metavar="{test}", title="rules subcommands")
    test = rules_commands.add_parser(
        "test",
        formatter_class=formatter,
        help="does EVENT_FILE match the pattern in PATTERN_FILE?",
        description=__doc__,
        epilog=RULES_EPILOG,
    )
    test.add_argument("pattern_file", metavar="PATTERN_FILE", help="a JSON event pattern ('-' for stdin)")
    test.add_argument("event_file", metavar="EVENT_FILE", help="a JSON event ('-' for stdin)")
    test.set_defaults(handler=cmd_rules_test)

    def choose(_args: argparse.Namespace) -> int:
        rules.print_usage(sys.stderr)
        print(f"{rules.prog}: error: choose a rules subcommand: test", file=sys.stderr)
        return EXIT_INVALID

    rules.set_defaults(handler=choose)


def cmd_rules_test(args: argparse.Namespace) -> int:
    if args.pattern_file == "-" and args.event_file == "-":
        return _invalid("only one of PATTERN_FILE and EVENT_FILE can be '-' (standard input)")
    try:
        pattern_text = _read(args.pattern_file)
        event_text = _read(args.event_file)
    except OSError as exc:
        return _invalid(f"{exc.filename or '-'}: cannot read: {exc.strerror or exc}")
    try:
        compiled = compile_pattern_json(pattern_text)
    except PatternError as exc:
        return _invalid(f"{args.pattern_file}: invalid pattern: {exc}")
    try:
        event = json.loads(event_text)
    except json.JSONDecodeError as exc:
        return _invalid(
            f"{args.event_file}: invalid event: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        )
    if not isinstance(event, dict):
        return _invalid(f"{args.event_file}: invalid event: an event must be a JSON object")
    if Matcher([("pattern", compiled)]).matches(event):
        print("match")
        return EXIT_MATCH
    print("no match")
    return EXIT_NO_MATCH


def _read(name: str) -> str:
    if name == "-":
        return sys.stdin.read()
    return Path(name).read_text(encoding="utf-8")


def _invalid(message: str) -> int:
    print(f"mqgate rules test: error: {message}", file=sys.stderr)
    return EXIT_INVALID
