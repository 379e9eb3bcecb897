"""`mqgate admin message ...`: find messages, show one with its consumption state per group, list and resend a
group's dead letters (RocketMQ's queryMsgByKey, queryMsgByUniqueKey, queryMsgById, the Dashboard's message trace,
and its dead-letter resend), through the admin API's /admin/messages and /admin/dead-letters."""

from __future__ import annotations

import argparse
import urllib.parse
from typing import Any

from mqgate.commands.connect import EXIT_OK, EXIT_REFUSED, EXIT_USAGE, CliError, RestClient
from mqgate.commands.output import choose, committed_offset_cell, emit, quote, table, time_arg
from mqgate.commands.terminal import progress_bar, stdout_console

# Dead letters listed per request while resending them all: one request lists a page, the next resends it.
RESEND_PAGE = 100


def add_message_parser(
    nouns: argparse._SubParsersAction[argparse.ArgumentParser], output: argparse.ArgumentParser
) -> None:
    message = nouns.add_parser("message", help="query messages, show one, list and resend dead letters")
    verbs = message.add_subparsers(dest="admin_verb", metavar="ACTION", title="actions")
    query = verbs.add_parser(
        "query",
        parents=[output],
        help="messages of a topic by key, unique id or store time",
        description="Find messages of --topic by --key (newest first), by --id (a unique id; with --group, its retry\n"
        "and dead-letter copies too), or by store time alone (--from/--to: the first ones of the range).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    query.add_argument("--topic", required=True)
    how = query.add_mutually_exclusive_group()
    how.add_argument("--key", help="a key the producer gave (KEYS)")
    how.add_argument("--id", dest="unique_id", metavar="MSG_ID", help="the unique id a producer's send returned")
    query.add_argument("--group", help="with --id: include the group's retry and dead-letter copies")
    query.add_argument("--from", dest="from_", metavar="TIME", help="stored at or after (ISO 8601 or epoch ms)")
    query.add_argument("--to", metavar="TIME", help="stored at or before")
    query.add_argument("--limit", type=int, default=32, metavar="N", help="at most N (1 to 64, default 32)")
    query.set_defaults(admin_action=_query)
    show = verbs.add_parser(
        "show", parents=[output], help="one message whole, and where it stands for each group consuming its topic"
    )
    show.add_argument("offset_msg_id", metavar="OFFSET_MSG_ID", help="the offset message id (query lists it)")
    show.add_argument("--group", help="the state for this group only")
    show.set_defaults(admin_action=_show)
    dlq = verbs.add_parser("dlq", parents=[output], help="a group's dead letters, a page at a time")
    dlq.add_argument("group", metavar="GROUP")
    dlq.add_argument("--from", dest="from_", metavar="TIME")
    dlq.add_argument("--to", metavar="TIME")
    dlq.add_argument("--limit", type=int, default=32, metavar="N", help="at most N (default 32)")
    dlq.add_argument("--start-offset", type=int, metavar="N", help="the next offset a previous page named")
    dlq.set_defaults(admin_action=_dlq)
    resend = verbs.add_parser(
        "resend",
        parents=[output],
        help="send dead letters again to the topic they died in (each once)",
        description="Send a group's dead letters again to the topic each was first consumed from, with a fresh\n"
        "message id; a letter resent once is not resent again. Name them with --id (offset message ids, as\n"
        "`message dlq` lists them), --msg-id (a unique id), or --all (within --from/--to).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    resend.add_argument("group", metavar="GROUP")
    which = resend.add_mutually_exclusive_group(required=True)
    which.add_argument("--id", dest="ids", action="append", metavar="OFFSET_MSG_ID", help="repeat for several")
    which.add_argument("--msg-id", help="every dead letter with this unique id")
    which.add_argument("--all", action="store_true", help="every dead letter (within --from/--to)")
    resend.add_argument("--from", dest="from_", metavar="TIME")
    resend.add_argument("--to", metavar="TIME")
    resend.set_defaults(admin_action=_resend)
    message.set_defaults(admin_action=choose(message, "query, show, dlq, resend"))


def _time_query(args: argparse.Namespace) -> dict[str, object]:
    query: dict[str, object] = {}
    if args.from_ is not None:
        query["from"] = time_arg(args.from_, "--from")
    if args.to is not None:
        query["to"] = time_arg(args.to, "--to")
    return query


MESSAGE_COLUMNS = ["store time", "offset msg id", "msg id", "queue", "offset", "tags", "keys", "body"]


def _message_rows(messages: list[dict[str, Any]]) -> list[list[object]]:
    return [
        [
            m["store_time"],
            m["offset_msg_id"],
            m["msg_id"],
            m["queue_id"],
            m["queue_offset"],
            m["tags"],
            " ".join(m["keys"]),
            _body_cell(m),
        ]
        for m in messages
    ]


def _body_cell(message: dict[str, Any]) -> str:
    body = message["body"] if message["body_encoding"] == "text" else f"base64:{message['body']}"
    body = body.replace("\n", "\\n")
    return f"{body[:80]}..." if len(body) > 80 or message["body_truncated"] else body


def _query(client: RestClient, args: argparse.Namespace) -> int:
    if args.group is not None and args.unique_id is None:
        raise CliError("--group goes with --id", EXIT_USAGE)
    query: dict[str, object] = {"topic": args.topic, "limit": args.limit, **_time_query(args)}
    if args.key is not None:
        query["key"] = args.key
    elif args.unique_id is not None:
        query["id"] = args.unique_id
        if args.group is not None:
            query["group"] = args.group
    elif "from" not in query and "to" not in query:
        raise CliError("give --key, --id, or a time range with --from/--to", EXIT_USAGE)
    answer = client.call("GET", f"/admin/messages?{urllib.parse.urlencode(query)}")

    def render(a: dict[str, Any]) -> None:
        found = len(a["messages"])
        table(
            f"{found} message(s) of {a['topic']} by {a['by']}",
            MESSAGE_COLUMNS,
            _message_rows(a["messages"]),
            ("queue", "offset"),
        )

    return emit(args, answer, render)


def _show(client: RestClient, args: argparse.Namespace) -> int:
    path = f"/admin/messages/{quote(args.offset_msg_id)}"
    if args.group is not None:
        path += f"?group={quote(args.group)}"
    answer = client.call("GET", path)

    def render(a: dict[str, Any]) -> None:
        m = a["message"]
        fields = [
            [key, m[key]]
            for key in (
                "topic", "queue_id", "queue_offset", "msg_id", "offset_msg_id", "tags", "keys", "store_time",
                "born_host", "store_host", "reconsume_times", "body_size",
            )
        ]  # fmt: skip
        table(f"message {m['offset_msg_id']}", ["field", "value"], fields)
        table("properties", ["name", "value"], [[k, v] for k, v in sorted(m["properties"].items())])
        label = "body" if m["body_encoding"] == "text" else "body (base64)"
        stdout_console().print(f"{label}:", markup=False)
        print(m["body"])
        rows = [
            [
                t["group"],
                t["state"] or "",
                committed_offset_cell(t["committed_offset"]) if "committed_offset" in t else "",
                t.get("error", ""),
            ]
            for t in a["tracks"]
        ]
        table(f"consumption of {a['consumed_topic']}", ["group", "state", "committed offset", "note"], rows)

    return emit(args, answer, render)


def _dlq(client: RestClient, args: argparse.Namespace) -> int:
    query: dict[str, object] = {"limit": args.limit, **_time_query(args)}
    if args.start_offset is not None:
        query["start_offset"] = args.start_offset
    answer = client.call("GET", f"/admin/dead-letters/{quote(args.group)}?{urllib.parse.urlencode(query)}")

    def render(a: dict[str, Any]) -> None:
        rows = [
            [*row, letter["original_topic"], letter["reason"], "yes" if letter["resent"] else "no"]
            for row, letter in zip(_message_rows(a["letters"]), a["letters"], strict=True)
        ]
        columns = [*MESSAGE_COLUMNS, "first topic", "reason", "resent"]
        table(f"dead letters of {a['group']} ({a['total']} in {a['topic']})", columns, rows, ("queue", "offset"))
        if a["next_offset"] is not None:
            print(f"more: --start-offset {a['next_offset']}")

    return emit(args, answer, render)


def _resend(client: RestClient, args: argparse.Namespace) -> int:
    path = f"/admin/dead-letters/{quote(args.group)}/resend"
    if args.ids:
        answer = client.call("POST", path, {"ids": args.ids})
    elif args.msg_id:
        answer = client.call("POST", path, {"msg_id": args.msg_id})
    else:
        answer = _resend_all(client, args, path)
    code = EXIT_OK if not answer["failed"] and not answer["stopped"] else EXIT_REFUSED

    def render(a: dict[str, Any]) -> None:
        print(f"{a['resent']} resent, {a['already_resent']} resent before, {a['failed']} failed")
        rows = [[o["dead_letter_id"], o["status"], o["topic"], o["new_message_id"], o["reason"]] for o in a["outcomes"]]
        if rows:
            table("outcomes", ["dead letter", "status", "topic", "new message", "reason"], rows)
        if a["stopped"]:
            print(f"stopped early: {a['stopped']}")

    emit(args, answer, render)
    return code


def _resend_all(client: RestClient, args: argparse.Namespace, path: str) -> dict[str, Any]:
    """Every dead letter in the range, a page at a time: list a page, resend its letters by id; the bar counts
    the letters looked at (those resent before are skipped by the server)."""
    times = _time_query(args)
    listing = f"/admin/dead-letters/{quote(args.group)}"
    first = client.call("GET", f"{listing}?{urllib.parse.urlencode({'limit': RESEND_PAGE, **times})}")
    total: dict[str, Any] = {"resent": 0, "already_resent": 0, "failed": 0, "stopped": None, "outcomes": []}
    page = first
    with progress_bar(f"resending dead letters of {args.group}", first["total"], enabled=not args.json) as advance:
        while page["letters"]:
            ids = [letter["offset_msg_id"] for letter in page["letters"]]
            answer = client.call("POST", path, {"ids": ids})
            for key in ("resent", "already_resent", "failed"):
                total[key] += answer[key]
            total["outcomes"] += answer["outcomes"]
            advance(len(ids))
            if answer["stopped"]:
                total["stopped"] = answer["stopped"]
                break
            if page["next_offset"] is None:
                break
            query = {"limit": RESEND_PAGE, "start_offset": page["next_offset"], **times}
            page = client.call("GET", f"{listing}?{urllib.parse.urlencode(query)}")
    return {"group": args.group, **total}
