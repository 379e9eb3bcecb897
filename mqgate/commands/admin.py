"""`mqgate admin`: topics, consumer groups, clients, messages and the store of a running `mqgate serve`, through its
admin HTTP API (mqgate/http/admin_api.py), as RocketMQ's mqadmin does for a broker.

    mqgate admin topic list|status|create|update|delete
    mqgate admin group list|create|delete|reset-offset
    mqgate admin consumer progress GROUP
    mqgate admin client list
    mqgate admin message query|show|dlq|resend          (admin_message_cli.py)
    mqgate admin store stats
    mqgate admin --namesrv HOST:PORT cluster list|topic ...|group list|consumer progress   (admin_cluster.py)

Tables by default (whole rows when not printed to a terminal), `--json` for scripts: the API's answer as it came.
Long operations (reset-offset over several topics, resend) show a progress bar in a terminal. It speaks HTTP to
`--url` with `--token` as `mqgate connect` does; with `--namesrv` it reads and changes a whole cluster over
remoting instead, as mqadmin -n does. Exit codes: 0 done, 1 the server refused (its error is shown, e.g.
an unknown topic) or cannot be reached, 2 a bad command line.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from mqgate.commands import admin_cluster
from mqgate.commands.admin_cluster import DEFAULT_NAMESRV, NAMESRV_ENV
from mqgate.commands.admin_message import add_message_parser
from mqgate.commands.connect import EXIT_USAGE, CliError, RestClient, add_server_options
from mqgate.commands.output import choose, committed_offset_cell, emit, quote, table, time_arg
from mqgate.commands.terminal import progress_bar

EPILOG = """\
examples:
  mqgate admin topic list
  mqgate admin topic create orders --queues 8
  mqgate admin topic status orders
  mqgate admin consumer progress billing
  mqgate admin group reset-offset billing --topic orders --to 2024-05-01T12:00:00Z
  mqgate admin client list
  mqgate admin message query --topic orders --key order-42
  mqgate admin message show 7F00000100002A9F0000000000000000
  mqgate admin message resend billing --all
  mqgate admin store stats --json
  mqgate admin --namesrv 10.0.0.5:9876 cluster list
  mqgate admin --namesrv 10.0.0.5:9876 topic create orders --cluster DefaultCluster --queues 8

times: ISO 8601 (naive times are UTC) or epoch milliseconds
exit codes: 0 done, 1 the server refused the request or cannot be reached, 2 bad command line"""


def add_admin_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], formatter: type[argparse.HelpFormatter]
) -> None:
    admin = commands.add_parser(
        "admin",
        formatter_class=formatter,
        help="topics, groups, lag, clients, messages and the store of mqgate serve (as mqadmin)",
        description=__doc__,
        epilog=EPILOG,
    )
    add_server_options(admin)
    admin.add_argument(
        "--namesrv",
        metavar="'HOST:PORT;HOST:PORT'",
        help="a cluster's NameServers: read and change the whole cluster over remoting, as mqadmin -n"
        f" ({admin_cluster.SERVED}); `cluster list`, --cluster and --broker use $NAMESRV_ADDR without it, else"
        f" {DEFAULT_NAMESRV}",
    )
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--json", action="store_true", help="print the API's JSON answer instead of tables")
    nouns = admin.add_subparsers(dest="admin_noun", metavar="SUBJECT", title="subjects")

    topic = nouns.add_parser("topic", help="list, inspect, create, change and delete topics")
    verbs = topic.add_subparsers(dest="admin_verb", metavar="ACTION", title="actions")
    listing = verbs.add_parser("list", parents=[output], help="topics with queue counts, permissions and messages")
    listing.add_argument("--kind", default="all", choices=["all", "normal", "retry", "dlq", "system"])
    listing.set_defaults(admin_action=_topic_list, cluster_action=admin_cluster.topic_list)
    status = verbs.add_parser("status", parents=[output], help="a topic's route, queues' offsets and groups")
    status.add_argument("topic", metavar="TOPIC")
    status.set_defaults(admin_action=_topic_status, cluster_action=admin_cluster.topic_status)
    create = verbs.add_parser("create", parents=[output], help="create a topic")
    create.add_argument("topic", metavar="TOPIC")
    create.add_argument("--queues", type=int, metavar="N", help="read and write queues (default: the broker's)")
    create.add_argument("--perm", default="rw", help="r, w or rw (default rw)")
    create.add_argument(
        "--type", dest="message_type", default="NORMAL", choices=["NORMAL", "FIFO", "DELAY", "TRANSACTION", "MIXED"]
    )
    create.add_argument("--cluster", metavar="C", help="with --namesrv: on every broker group of cluster C")
    create.add_argument("--broker", metavar="B", help="with --namesrv: on broker group B only")
    create.set_defaults(admin_action=_topic_create, cluster_action=admin_cluster.topic_create)
    update = verbs.add_parser("update", parents=[output], help="change queue counts or permissions")
    update.add_argument("topic", metavar="TOPIC")
    update.add_argument("--read-queues", type=int, metavar="N")
    update.add_argument("--write-queues", type=int, metavar="N")
    update.add_argument("--perm", help="r, w or rw")
    update.set_defaults(admin_action=_topic_update)
    delete = verbs.add_parser("delete", parents=[output], help="delete a topic, its queues and groups' offsets in it")
    delete.add_argument("topic", metavar="TOPIC")
    delete.set_defaults(admin_action=_topic_delete, cluster_action=admin_cluster.topic_delete)
    topic.set_defaults(admin_action=choose(topic, "list, status, create, update, delete"))

    group = nouns.add_parser("group", help="list, create and delete consumer groups; reset their offsets")
    verbs = group.add_subparsers(dest="admin_verb", metavar="ACTION", title="actions")
    verbs.add_parser("list", parents=[output], help="groups with members, topics and lag").set_defaults(
        admin_action=_group_list, cluster_action=admin_cluster.group_list
    )
    create = verbs.add_parser("create", parents=[output], help="create a group or change its settings")
    create.add_argument("group", metavar="GROUP")
    create.add_argument("--retry-max-times", type=int, metavar="N", help="retries before the dead-letter topic")
    create.add_argument("--consume-enable", action=argparse.BooleanOptionalAction, default=None)
    create.set_defaults(admin_action=_group_create)
    delete = verbs.add_parser("delete", parents=[output], help="delete a group's settings and offsets")
    delete.add_argument("group", metavar="GROUP")
    delete.set_defaults(admin_action=_group_delete)
    reset = verbs.add_parser(
        "reset-offset",
        parents=[output],
        help="move a group's offsets to the first message stored at or after a time",
        description=(
            "Move the group's offsets to the first message stored at or after --to, on every queue of --topic, or\n"
            "of every topic it consumes. Refused while members that hold their positions are live (push consumers,\n"
            "connector tasks, rule targets, connected MQTT clients: stop them first); pop consumers (gRPC\n"
            "SimpleConsumer) follow at once."
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    reset.add_argument("group", metavar="GROUP")
    reset.add_argument("--to", required=True, metavar="TIME", help="ISO 8601 or epoch ms; 0: the oldest kept")
    reset.add_argument("--topic", help="one topic (default: every topic the group consumes)")
    reset.set_defaults(admin_action=_group_reset)
    group.set_defaults(admin_action=choose(group, "list, create, delete, reset-offset"))

    consumer = nouns.add_parser("consumer", help="a group's progress: offsets and lag per queue")
    verbs = consumer.add_subparsers(dest="admin_verb", metavar="ACTION", title="actions")
    progress = verbs.add_parser("progress", parents=[output], help="broker offset, committed offset, lag per queue")
    progress.add_argument("group", metavar="GROUP")
    progress.set_defaults(admin_action=_consumer_progress, cluster_action=admin_cluster.consumer_progress)
    consumer.set_defaults(admin_action=choose(consumer, "progress"))

    client = nouns.add_parser("client", help="connected clients: MQTT sessions and core consumers")
    verbs = client.add_subparsers(dest="admin_verb", metavar="ACTION", title="actions")
    clients = verbs.add_parser("list", parents=[output], help="MQTT sessions and core consumers")
    clients.add_argument("--connected", action="store_true", help="MQTT sessions that are connected now only")
    clients.set_defaults(admin_action=_client_list)
    client.set_defaults(admin_action=choose(client, "list"))

    add_message_parser(nouns, output)

    store = nouns.add_parser("store", help="the store while it runs: statistics, disk, flush, recovery")
    verbs = store.add_subparsers(dest="admin_verb", metavar="ACTION", title="actions")
    verbs.add_parser(
        "stats", parents=[output], help="statistics, disk usage, flush state, recovery report"
    ).set_defaults(admin_action=_store_stats)
    store.set_defaults(admin_action=choose(store, "stats"))
    cluster = nouns.add_parser("cluster", help="with --namesrv: the brokers of a cluster")
    verbs = cluster.add_subparsers(dest="admin_verb", metavar="ACTION", title="actions")
    verbs.add_parser(
        "list", parents=[output], help="brokers, addresses, versions and last registrations (from the NameServers)"
    ).set_defaults(admin_action=_needs_namesrv, cluster_action=admin_cluster.cluster_list)
    cluster.set_defaults(admin_action=choose(cluster, "list"))
    admin.set_defaults(
        handler=cmd_admin, admin_action=choose(admin, "topic, group, consumer, client, message, store, cluster")
    )


def cmd_admin(args: argparse.Namespace) -> int:
    client = RestClient(args.url, args.token)
    try:
        cluster_only = (
            getattr(args, "cluster", None) or getattr(args, "broker", None) or args.admin_action is _needs_namesrv
        )
        if not args.namesrv and cluster_only:
            # What only a cluster answers goes to the NameServers of $NAMESRV_ADDR (mqadmin's variable), else to the
            # one a local `mqgate serve` runs.
            args.namesrv = os.environ.get(NAMESRV_ENV) or DEFAULT_NAMESRV
        if args.namesrv and getattr(args, "admin_verb", None):
            return admin_cluster.run_cluster_action(args)
        code: int = args.admin_action(client, args)
    except CliError as exc:
        print(f"mqgate: error: {exc}", file=sys.stderr)
        return exc.code
    return code


def _needs_namesrv(client: RestClient, args: argparse.Namespace) -> int:
    """The HTTP action of what only a cluster's NameServers answer (cmd_admin sends it to them)."""
    raise CliError("`cluster list` reads a cluster's NameServers: give --namesrv HOST:PORT", EXIT_USAGE)


# --- topics ------------------------------------------------------------------------------------------------

TOPIC_COLUMNS = ["topic", "kind", "read queues", "write queues", "perm", "type", "messages"]
TOPIC_KEYS = ["topic", "kind", "read_queues", "write_queues", "perm", "message_type", "messages"]


def _topic_rows(topics: list[dict[str, Any]]) -> list[list[object]]:
    return [[topic[key] for key in TOPIC_KEYS] for topic in topics]


def _topic_list(client: RestClient, args: argparse.Namespace) -> int:
    answer = client.call("GET", f"/admin/topics?kind={args.kind}")
    right = ("read queues", "write queues", "messages")
    return emit(
        args, answer, lambda a: table(f"topics at {client.url}", TOPIC_COLUMNS, _topic_rows(a["topics"]), right)
    )


def _topic_status(client: RestClient, args: argparse.Namespace) -> int:
    def render(topic: dict[str, Any]) -> None:
        table(
            f"topic {topic['topic']}", TOPIC_COLUMNS, _topic_rows([topic]), ("read queues", "write queues", "messages")
        )
        rows = [
            [q["queue_id"], q["min_offset"], q["max_offset"], q["messages"], q["last_update"]] for q in topic["queues"]
        ]
        columns = ["queue", "min offset", "max offset", "messages", "last update"]
        table("queues", columns, rows, ("queue", "min offset", "max offset", "messages"))
        print(f"groups consuming it: {', '.join(topic['groups']) or 'none'}")

    return emit(args, client.call("GET", f"/admin/topics/{quote(args.topic)}"), render)


def _topic_create(client: RestClient, args: argparse.Namespace) -> int:
    body: dict[str, object] = {"topic": args.topic, "perm": args.perm, "message_type": args.message_type}
    if args.queues is not None:
        body["queues"] = args.queues
    answer = client.call("POST", "/admin/topics", body)
    return emit(
        args, answer, lambda t: print(f"topic {t['topic']} created: {t['read_queues']} queues, perm {t['perm']}")
    )


def _topic_update(client: RestClient, args: argparse.Namespace) -> int:
    body = {
        key: value
        for key, value in (("read_queues", args.read_queues), ("write_queues", args.write_queues), ("perm", args.perm))
        if value is not None
    }
    if not body:
        raise CliError("give --read-queues, --write-queues or --perm", EXIT_USAGE)
    answer = client.call("PUT", f"/admin/topics/{quote(args.topic)}", body)
    return emit(
        args,
        answer,
        lambda t: print(
            f"topic {t['topic']}: {t['read_queues']} read queues, {t['write_queues']} write queues, perm {t['perm']}"
        ),
    )


def _topic_delete(client: RestClient, args: argparse.Namespace) -> int:
    answer = client.call("DELETE", f"/admin/topics/{quote(args.topic)}")
    return emit(args, answer, lambda a: print(f"topic {a['deleted']} deleted"))


# --- groups ------------------------------------------------------------------------------------------------


def _group_list(client: RestClient, args: argparse.Namespace) -> int:
    def render(answer: dict[str, Any]) -> None:
        rows = [
            [g["group"], "yes" if g["configured"] else "no", g["members"], ", ".join(g["topics"]), g["lag"]]
            for g in answer["groups"]
        ]
        table(
            f"consumer groups at {client.url}",
            ["group", "configured", "members", "topics", "lag"],
            rows,
            ("members", "lag"),
        )

    return emit(args, client.call("GET", "/admin/groups"), render)


def _group_create(client: RestClient, args: argparse.Namespace) -> int:
    body: dict[str, object] = {"group": args.group}
    if args.retry_max_times is not None:
        body["retry_max_times"] = args.retry_max_times
    if args.consume_enable is not None:
        body["consume_enable"] = args.consume_enable
    answer = client.call("POST", "/admin/groups", body)
    what = "created" if answer["created"] else "updated"
    return emit(args, answer, lambda g: print(f"group {g['group']} {what}: retry max times {g['retry_max_times']}"))


def _group_delete(client: RestClient, args: argparse.Namespace) -> int:
    answer = client.call("DELETE", f"/admin/groups/{quote(args.group)}")
    return emit(args, answer, lambda a: print(f"group {a['deleted']} deleted with its offsets"))


def _group_reset(client: RestClient, args: argparse.Namespace) -> int:
    when = time_arg(args.to, "--to")
    if args.topic is not None:
        topics = [args.topic]
    else:
        progress = client.call("GET", f"/admin/groups/{quote(args.group)}/progress")
        topics = sorted({q["topic"] for q in progress["queues"] if not q["topic"].startswith(("%LMQ%", "%RETRY%"))})
        if not topics:
            raise CliError(f"group {args.group!r} consumes no topic; name one with --topic")
    answers = []
    with progress_bar(f"resetting {args.group}", len(topics), enabled=not args.json) as advance:
        for topic in topics:
            answers.append(
                client.call("POST", f"/admin/groups/{quote(args.group)}/reset-offset", {"topic": topic, "time": when})
            )
            advance(1)

    def render(results: list[dict[str, Any]]) -> None:
        rows = [[r["topic"], queue, offset] for r in results for queue, offset in sorted(r["offsets"].items())]
        table(
            f"offsets of {args.group} reset to {results[0]['time']}",
            ["topic", "queue", "offset"],
            rows,
            ("queue", "offset"),
        )

    return emit(args, answers, render)


def _consumer_progress(client: RestClient, args: argparse.Namespace) -> int:
    def render(answer: dict[str, Any]) -> None:
        rows = [
            [
                q["topic"],
                q["queue_id"],
                q["broker_offset"],
                committed_offset_cell(q["consumer_offset"]),
                q["lag"],
                q["last_consume"],
            ]
            for q in answer["queues"]
        ]
        columns = ["topic", "queue", "broker offset", "consumer offset", "lag", "last consume time"]
        table(f"progress of {answer['group']}", columns, rows, ("queue", "broker offset", "consumer offset", "lag"))
        print(f"total lag: {answer['lag']}; live members: {len(answer['members'])}")
        if answer["members"]:
            table("members", ["client id", "type", "topics"],
                  [[m["client_id"], m["consume_type"], ", ".join(m["topics"])] for m in answer["members"]])  # fmt: skip

    return emit(args, client.call("GET", f"/admin/groups/{quote(args.group)}/progress"), render)


# --- clients and the store ---------------------------------------------------------------------------------


def _client_list(client: RestClient, args: argparse.Namespace) -> int:
    answer = client.call("GET", "/admin/clients")
    if args.connected:
        answer["mqtt"] = [session for session in answer["mqtt"] if session["connected"]]

    def render(a: dict[str, Any]) -> None:
        rows = []
        for s in a["mqtt"]:
            subscriptions = ", ".join(
                (f"$share/{sub['share_group']}/" if sub["share_group"] else "")
                + f"{sub['topic_filter']} (QoS {sub['qos']})"
                for sub in s["subscriptions"]
            )
            state = f"connected from {s['peer']}" if s["connected"] else f"away since {s['disconnected_at']}"
            version = {4: "3.1.1", 5: "5.0"}.get(s["protocol_version"], "")
            rows.append([s["client_id"], state, version, subscriptions, s["inflight"], s["queued"]])
        columns = ["client id", "state", "MQTT", "subscriptions", "inflight", "queued"]
        if a["mqtt_enabled"]:
            table("MQTT sessions", columns, rows, ("inflight", "queued"))
        else:
            print("MQTT gateway: off")
        members = [
            [m["group"], m["client_id"], m["consume_type"], m["message_model"], ", ".join(m["topics"])]
            for m in a["consumers"]
        ]
        table("core consumers (group members)", ["group", "client id", "type", "model", "topics"], members)

    return emit(args, answer, render)


def _store_stats(client: RestClient, args: argparse.Namespace) -> int:
    def render(a: dict[str, Any]) -> None:
        stats = [[key, value] for key, value in a["stats"].items()]
        stats += [["unflushed_bytes", a["unflushed_bytes"]], ["undispatched_bytes", a["undispatched_bytes"]]]
        table(f"store {a['store_dir']} ({a['flush_mode']})", ["statistic", "value"], stats, ("value",))
        disk = a["disk"]
        fs = disk["filesystem"]
        rows: list[list[object]] = [[part, size] for part, size in disk["parts"].items()]
        rows.append(["store total", disk["store_bytes"]])
        rows.append(["file system used", f"{fs['used_bytes']} of {fs['total_bytes']} ({fs['used_ratio']:.1%})"])
        table("disk usage (bytes)", ["part", "bytes"], rows, ("bytes",))
        recovery = a["recovery"]
        rows = [[key, value] for key, value in recovery.items() if key != "corrupt_regions"]
        rows += [
            ["corrupt", f"{c['file']} @ {c['file_offset']} ({c['skipped_bytes']} bytes)"]
            for c in recovery["corrupt_regions"]
        ]
        table("recovery on open", ["field", "value"], rows, ("value",))

    return emit(args, client.call("GET", "/admin/store"), render)
