"""`mqgate rules`: EventBridge rules from the command line.

`mqgate rules test PATTERN_FILE EVENT_FILE`: does an event match an EventBridge pattern (as AWS TestEventPattern)?
Both files are JSON (``-`` reads standard input, for one of them). Answers with grep's exit codes: prints
``match`` and exits 0, prints ``no match`` and exits 1; an unreadable file, an invalid pattern (with its path in
the pattern and the reason) or an event that is not a JSON object exits 2 with the reason on stderr.

`mqgate rules list`: the rules a running `mqgate serve` has in force, and the rule files it refused, each with its
error (`file:line:column: reason`) and the rules it names. It speaks HTTP to `--url` with `--token` as `mqgate
connect` does, and exits as it does: 0 listed (refused files are listed, not an exit code), 1 the server cannot be
reached or refused the request, 2 a bad command line.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from eventbridge.patterns.compiler import compile_pattern_json
from eventbridge.patterns.errors import PatternError
from eventbridge.patterns.matcher import Matcher
from mqgate.commands.connect import CliError, RestClient, add_server_options
from mqgate.commands.output import emit, table

EXIT_MATCH = 0
EXIT_NO_MATCH = 1
EXIT_INVALID = 2

RULES_EPILOG = """\
exit codes (as grep): 0 match, 1 no match, 2 an invalid pattern or event, or a file that cannot be read

example:
  mqgate rules test examples/pattern.json examples/event.json"""

LIST_EPILOG = """\
exit codes: 0 listed (refused files included), 1 the server refused the request or cannot be reached, 2 bad
command line

example:
  mqgate rules list"""


def add_rules_parser(commands: Any, formatter: type[argparse.HelpFormatter]) -> None:
    rules = commands.add_parser(
        "rules",
        formatter_class=formatter,
        help="EventBridge rules: list those in force and the refused files, test a pattern against an event",
        description="EventBridge rules from the command line.",
    )
    rules_commands = rules.add_subparsers(dest="rules_command", metavar="{list,test}", title="rules subcommands")
    listing = rules_commands.add_parser(
        "list",
        formatter_class=formatter,
        help="the rules of a running mqgate serve, and the rule files it refused with their errors",
        description=__doc__,
        epilog=LIST_EPILOG,
    )
    add_server_options(listing)
    listing.add_argument("--json", action="store_true", help="print the API's JSON answer instead of tables")
    listing.set_defaults(handler=cmd_rules_list)
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
        print(f"{rules.prog}: error: choose a rules subcommand: list, test", file=sys.stderr)
        return EXIT_INVALID

    rules.set_defaults(handler=choose)


def cmd_rules_list(args: argparse.Namespace) -> int:
    try:
        answer = RestClient(args.url, args.token).call("GET", "/rules")
    except CliError as exc:
        print(f"mqgate: error: {exc}", file=sys.stderr)
        return exc.code
    return emit(args, answer, _print_rules)


def _print_rules(answer: dict[str, Any]) -> None:
    rows: list[list[object]] = []
    for rule in answer["rules"]:
        targets = ", ".join(f"{target['id']} ({target['state']})" for target in rule["targets"])
        what = json.dumps(rule["pattern"]) if rule["pattern"] is not None else ""
        if rule["schedule"]:
            what = f"{what} {rule['schedule']}".strip()
        file = rule["file"] or ""
        if rule.get("file_error"):
            file += " (the file was refused since: this is the rule as it was)"
        rows.append([rule["bus"], rule["name"], "yes" if rule["enabled"] else "no", what, targets, file])
    table("rules in force", ["bus", "rule", "enabled", "pattern or schedule", "targets", "file"], rows)
    refused = answer["refused"]
    if not refused:
        print("no rule file refused")
        return
    # Lines, not a table: the error is what to read, whole, with its file:line:column.
    print(f"{len(refused)} rule file(s) refused; their rules in force, if any, are as they were before the change:")
    for entry in refused:
        names = f" (it names {', '.join(entry['rules'])})" if entry["rules"] else ""
        print(f"  {entry['error']}{names}")


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
