"""`mqgate events`: replays and dead letters of a running `mqgate serve`'s EventBridge, from the command line.

    mqgate events replay --bus B --from T1 --to T2 [--rule R] [--name N] [--archive A]
    mqgate events dlq list [--topic T | --bus B] [--limit N] [--offset N]
    mqgate events dlq redrive [--topic T | --bus B] [--rule R [--target ID]]

Times are ISO 8601 (2024-05-01T12:00:00Z, or with an offset; without one they are UTC) or epoch milliseconds: store
times, or with --archive the events' own `time` (an archive is replayed to its bus by event time, as AWS does).
`--bus B` names the bus's default dead-letter topic, %EVENTBUS-DLQ%B; a target's own dead_letter_topic is given
with --topic. It speaks HTTP to `--url` with `--token` as `mqgate connect` does, and exits as it does: 0 done,
1 the server refused (its error is shown) or cannot be reached, 2 a bad command line.
"""

from __future__ import annotations

import argparse
import sys
import urllib.parse

from rich.table import Table

from eventbridge.bus import default_dead_letter_topic
from eventbridge.errors import ReprocessError
from eventbridge.rules.model import DEFAULT_BUS
from eventbridge.time_range import parse_time_ms
from mqgate.commands.connect import EXIT_OK, EXIT_USAGE, CliError, RestClient, add_server_options
from mqgate.commands.output import choose
from mqgate.commands.terminal import stdout_console, working

EPILOG = """\
examples:
  mqgate events replay --bus orders --from 2024-05-01T12:00:00Z --to 2024-05-01T13:00:00Z
  mqgate events replay --bus orders --from 1714564800000 --to 1714568400000 --rule to-billing --name billing-fix
  mqgate events replay --bus orders --archive orders-2024 --from 2024-01-01 --to 2024-02-01
  mqgate events dlq list --bus orders --limit 20
  mqgate events dlq redrive --bus orders --rule to-billing --target billing-api

times: ISO 8601 with a timezone (naive times are UTC) or epoch milliseconds
exit codes: 0 done, 1 the server refused the request or cannot be reached, 2 bad command line"""


def add_events_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], formatter: type[argparse.HelpFormatter]
) -> None:
    events = commands.add_parser(
        "events",
        formatter_class=formatter,
        help="replay a bus's events, list and redrive dead letters (REST API of mqgate serve)",
        description=__doc__,
        epilog=EPILOG,
    )
    add_server_options(events)
    actions = events.add_subparsers(dest="events_command", metavar="ACTION", title="actions")
    replay = actions.add_parser(
        "replay", formatter_class=formatter, help="deliver again the events a bus stored in a time range"
    )
    replay.add_argument("--bus", required=True, help="the bus whose events are replayed")
    replay.add_argument("--from", dest="from_", required=True, metavar="TIME", help="first store time (included)")
    replay.add_argument("--to", required=True, metavar="TIME", help="last store time (included)")
    replay.add_argument(
        "--rule", help="replay the events this rule of the bus matches, to it only (default: to every rule)"
    )
    replay.add_argument("--name", help="the replay's name, the `replayname` of its copies (default: generated)")
    replay.add_argument(
        "--archive", help="replay this archive of the bus (times are then event times) instead of the bus itself"
    )
    replay.set_defaults(events_handler=_replay)

    dlq = actions.add_parser("dlq", formatter_class=formatter, help="dead letters: list, redrive")
    dlq_actions = dlq.add_subparsers(dest="dlq_command", metavar="ACTION", title="actions")
    listing = dlq_actions.add_parser("list", formatter_class=formatter, help="the dead letters of a topic")
    _add_topic_options(listing)
    listing.add_argument("--limit", type=int, default=100, metavar="N", help="at most N entries (default 100)")
    listing.add_argument("--offset", type=int, default=0, metavar="N", help="skip the first N entries")
    listing.set_defaults(events_handler=_dlq_list)
    redrive = dlq_actions.add_parser(
        "redrive",
        formatter_class=formatter,
        help="send dead letters again to the target that failed them (each only once)",
    )
    _add_topic_options(redrive)
    redrive.add_argument("--rule", help="only this rule's dead letters (a name on the bus, or BUS/RULE)")
    redrive.add_argument("--target", metavar="ID", help="only this target's (with --rule)")
    redrive.set_defaults(events_handler=_dlq_redrive)
    dlq.set_defaults(events_handler=choose(dlq, "list, redrive"))
    events.set_defaults(handler=cmd_events, events_handler=choose(events, "replay, dlq"))


def _add_topic_options(parser: argparse.ArgumentParser) -> None:
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--topic", help="a dead-letter topic (a target's dead_letter_topic)")
    where.add_argument("--bus", help=f"the bus's default dead-letter topic (default: bus {DEFAULT_BUS!r})")


def cmd_events(args: argparse.Namespace) -> int:
    client = RestClient(args.url, args.token)
    try:
        code: int = args.events_handler(client, args)
    except CliError as exc:
        print(f"mqgate: error: {exc}", file=sys.stderr)
        return exc.code
    return code


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


def _time(value: str, option: str) -> int:
    try:
        return parse_time_ms(value, option)
    except ReprocessError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None


def _topic(args: argparse.Namespace) -> tuple[str, str]:
    """The dead-letter topic, and the bus it belongs to when --bus named it."""
    if args.topic is not None:
        return args.topic, ""
    bus = args.bus or DEFAULT_BUS
    return default_dead_letter_topic(bus), bus


# --- actions ---------------------------------------------------------------------------------------------


def _replay(client: RestClient, args: argparse.Namespace) -> int:
    body: dict[str, object] = {"from": _time(args.from_, "--from"), "to": _time(args.to, "--to")}
    if args.rule is not None:
        body["rule"] = args.rule
    if args.name is not None:
        body["name"] = args.name
    if args.archive is not None:
        body["archive"] = args.archive
    with working(f"replaying bus {args.bus}"):
        summary = client.call("POST", f"/buses/{_quote(args.bus)}/replays", body)
    to = f"rule {summary['rule']!r}" if summary["rule"] else "every rule"
    # A replay to one rule sends only the events its pattern matches; the others are counted, not sent.
    unmatched = f"; {summary['unmatched']} not matched by its pattern" if summary["rule"] else ""
    if summary.get("archive"):
        print(
            f"replay {summary['name']}: {summary['replayed']} events of archive {summary['archive']!r} with event "
            f"times from {summary['from']} to {summary['to']} sent again to {to} of bus {summary['bus']!r}"
            + (f" ({unmatched[2:]})" if unmatched else "")
        )
        return EXIT_OK
    print(
        f"replay {summary['name']}: {summary['replayed']} events of bus {summary['bus']!r} stored from "
        f"{summary['from']} to {summary['to']} sent again to {to} ({summary['skipped']} replayed copies skipped"
        f"{unmatched})"
    )
    columns = ["queue_id", "from_offset", "to_offset", "replayed", "skipped"] + (["unmatched"] if unmatched else [])
    table = Table(title=f"queues of bus {summary['bus']}", title_justify="left")
    for column in columns:
        table.add_column(column.replace("queue_id", "queue").replace("_", " "), justify="right")
    for queue in summary["queues"]:
        table.add_row(*(str(queue[key]) for key in columns))
    stdout_console().print(table)
    return EXIT_OK


def _dlq_list(client: RestClient, args: argparse.Namespace) -> int:
    topic, _ = _topic(args)
    query = urllib.parse.urlencode({"limit": args.limit, "offset": args.offset})
    page = client.call("GET", f"/dead-letters/{_quote(topic)}?{query}")
    shown = len(page["entries"])
    first = page["offset"] + 1 if shown else page["offset"]
    table = Table(
        title=f"dead letters in {topic}: {first}-{page['offset'] + shown} of {page['total']}", title_justify="left"
    )
    for column in ("offset", "id", "type", "bus", "rule", "target", "status", "attempts", "stored", "redriven"):
        table.add_column(column, justify="right" if column in ("offset", "status", "attempts") else "left")
    table.add_column("error", overflow="fold")
    for entry in page["entries"]:
        table.add_row(
            f"{entry['queue_id']}/{entry['offset']}",
            *(_cell(entry[key]) for key in ("id", "type", "bus", "rule", "target", "status", "attempts")),
            entry["store_time"],
            "yes" if entry["redriven"] else "no",
            entry["error"],
        )
    stdout_console().print(table)
    return EXIT_OK


def _cell(value: object) -> str:
    return "" if value is None else str(value)


def _dlq_redrive(client: RestClient, args: argparse.Namespace) -> int:
    topic, bus = _topic(args)
    if args.target is not None and args.rule is None:
        raise CliError("--target needs --rule (target ids are per rule)", EXIT_USAGE)
    body: dict[str, object] = {}
    if args.rule is not None:
        body["rule"] = f"{bus}/{args.rule}" if bus and "/" not in args.rule else args.rule
    if args.target is not None:
        body["target"] = args.target
    with working(f"redriving {topic}"):
        summary = client.call("POST", f"/dead-letters/{_quote(topic)}/redrive", body)
    skipped = summary["skipped_gone"] + summary["skipped_not_dead_letters"]
    print(
        f"redrive of {topic}: {summary['redriven']} events sent again"
        + (f" ({skipped} skipped: rule or target gone, or not dead letters)" if skipped else "")
    )
    if summary["by_target"]:
        table = Table(title="sent again, by target", title_justify="left")
        for column in ("bus", "rule", "target", "events"):
            table.add_column(column, justify="right" if column == "events" else "left")
        for entry in summary["by_target"]:
            table.add_row(entry["bus"], entry["rule"], entry["target"], str(entry["redriven"]))
        stdout_console().print(table)
    return EXIT_OK
