"""`mqgate admin --namesrv HOST:PORT ...`: a whole cluster through its NameServers, over remoting, as mqadmin -n
does (remote_client/admin.py asks the brokers):

    mqgate admin --namesrv NS cluster list            brokers, addresses, versions, last registration
    mqgate admin --namesrv NS topic list|status T     topics over every broker group, queues per group
    mqgate admin --namesrv NS topic create T --cluster C | --broker B [--queues N] [--perm rw] [--type T]
    mqgate admin --namesrv NS topic delete T
    mqgate admin --namesrv NS group list              groups and the broker groups that have them
    mqgate admin --namesrv NS consumer progress G     offsets and lag per queue, summed over broker groups

`cluster list` and `topic create --cluster C | --broker B` need no --namesrv: they use $NAMESRV_ADDR (as mqadmin),
else 127.0.0.1:9876, the NameServer of a local `mqgate serve`. Exit codes as `mqgate admin`: 1 when a broker or
NameServer refuses or cannot be reached, 2 a bad command line.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
from collections.abc import Awaitable, Callable
from typing import Any

from core import CoreError
from mqgate.commands.connect import EXIT_USAGE, CliError
from mqgate.commands.output import emit, table
from remote_client.admin import ClusterAdmin, perm_of

ClusterAction = Callable[[ClusterAdmin, argparse.Namespace], Awaitable[int]]
# What `--namesrv` serves; the other subjects need a `mqgate serve`'s HTTP port (--url).
SERVED = "cluster list, topic list|status|create|delete, group list, consumer progress"
DEFAULT_QUEUES = 8  # mqadmin updateTopic's default read and write queue counts
# Where a command that only a cluster answers finds its NameServers without --namesrv: RocketMQ's tools read
# NAMESRV_ADDR; else the NameServer a local `mqgate serve` runs on RocketMQ's port.
NAMESRV_ENV = "NAMESRV_ADDR"
DEFAULT_NAMESRV = "127.0.0.1:9876"


def run_cluster_action(args: argparse.Namespace) -> int:
    action: ClusterAction | None = getattr(args, "cluster_action", None)
    if action is None:
        raise CliError(f"this command is not available with --namesrv (it serves: {SERVED}); use --url", EXIT_USAGE)

    async def run() -> int:
        async with ClusterAdmin(args.namesrv) as admin:
            return await action(admin, args)

    try:
        return asyncio.run(run())
    except ValueError as exc:  # a bad --namesrv or --perm
        raise CliError(str(exc), EXIT_USAGE) from None
    except (CoreError, LookupError) as exc:
        raise CliError(str(exc)) from None


def _when(ms: object) -> str:
    if not isinstance(ms, int) or ms <= 0:
        return ""
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC).isoformat(timespec="seconds")


async def cluster_list(admin: ClusterAdmin, args: argparse.Namespace) -> int:
    rows = await admin.clusters()

    def render(brokers: list[dict[str, Any]]) -> None:
        cells = [[b["cluster"], b["broker"], b["id"], b.get("role", ""), b["address"],
                  b.get("version", b.get("error", "")), _replication(b), _when(b["last_registration_ms"]),
                  b.get("topics", ""), b.get("messages_in_today", ""), b.get("messages_out_today", "")]
                 for b in brokers]  # fmt: skip
        columns = ["cluster", "broker", "id", "role", "address", "version", "replication", "last registration",
                   "topics", "in today", "out today"]  # fmt: skip
        table(f"brokers known to {args.namesrv}", columns, cells, ("id", "topics", "in today", "out today"))

    return emit(args, rows, render)


def _replication(row: dict[str, Any]) -> str:
    """A master: its slaves and whether one is in sync (what a SYNC_MASTER waits for); a slave: its lag."""
    if "replication" in row:
        return str(row["replication"])
    if row["id"] == 0:
        slaves = row.get("slaves")
        if slaves is None:
            return ""
        if not slaves:
            return "no slave"
        return f"{len(slaves)} slave(s), {'in sync' if row.get('in_sync') else 'none in sync'}"
    if "lag_bytes" not in row:
        return ""
    state = "in sync" if row.get("in_sync") else "not in sync"
    return f"lag {row['lag_bytes']} B, {row['lag_s']:.1f} s, {state}"


async def topic_list(admin: ClusterAdmin, args: argparse.Namespace) -> int:
    rows = await admin.topics()

    def render(topics: list[dict[str, Any]]) -> None:
        cells = [[t["topic"], ", ".join(sorted(t["groups"])), t["read_queues"], t["write_queues"]] for t in topics]
        table(f"topics of the cluster at {args.namesrv}", ["topic", "broker groups", "read queues", "write queues"],
              cells, ("read queues", "write queues"))  # fmt: skip

    return emit(args, rows, render)


async def topic_status(admin: ClusterAdmin, args: argparse.Namespace) -> int:
    status = await admin.topic_status(args.topic)

    def render(topic: dict[str, Any]) -> None:
        groups = [[name, g["master"], g["read_queues"], g["write_queues"], g["perm"]]
                  for name, g in sorted(topic["groups"].items())]  # fmt: skip
        table(f"topic {topic['topic']}", ["broker group", "master", "read queues", "write queues", "perm"], groups,
              ("read queues", "write queues"))  # fmt: skip
        queues = [[q["broker"], q["queue_id"], q["min_offset"], q["max_offset"], q["messages"],
                   _when(q["last_update_ms"])] for q in topic["queues"]]  # fmt: skip
        table("queues", ["broker", "queue", "min offset", "max offset", "messages", "last update"], queues,
              ("queue", "min offset", "max offset", "messages"))  # fmt: skip
        print(f"messages: {topic['messages']}")

    return emit(args, status, render)


async def topic_create(admin: ClusterAdmin, args: argparse.Namespace) -> int:
    if (args.cluster is None) == (args.broker is None):
        raise CliError("with --namesrv, name where the topic goes: --cluster C (every broker group) or --broker B",
                       EXIT_USAGE)  # fmt: skip
    queues = DEFAULT_QUEUES if args.queues is None else args.queues
    done = await admin.create_topic(
        args.topic, cluster=args.cluster, broker=args.broker, read_queues=queues, write_queues=queues,
        perm=perm_of(args.perm), message_type=args.message_type,
    )  # fmt: skip
    answer = {"topic": args.topic, "broker_groups": done, "queues": queues, "message_type": args.message_type}
    return emit(args, answer, lambda a: print(
        f"topic {a['topic']} created on {', '.join(a['broker_groups'])}: {a['queues']} queues each"
    ))  # fmt: skip


async def topic_delete(admin: ClusterAdmin, args: argparse.Namespace) -> int:
    done = await admin.delete_topic(args.topic)
    answer = {"deleted": args.topic, "broker_groups": done}
    return emit(args, answer, lambda a: print(f"topic {a['deleted']} deleted on {', '.join(a['broker_groups'])}"))


async def group_list(admin: ClusterAdmin, args: argparse.Namespace) -> int:
    rows = await admin.groups()

    def render(groups: list[dict[str, Any]]) -> None:
        cells = [[g["group"], ", ".join(g["brokers"]), g["retry_max_times"]] for g in groups]
        table(f"consumer groups of the cluster at {args.namesrv}", ["group", "broker groups", "retry max times"],
              cells, ("retry max times",))  # fmt: skip

    return emit(args, rows, render)


async def consumer_progress(admin: ClusterAdmin, args: argparse.Namespace) -> int:
    progress = await admin.consumer_progress(args.group)

    def render(answer: dict[str, Any]) -> None:
        cells = [[q["topic"], q["broker"], q["queue_id"], q["broker_offset"], q["consumer_offset"], q["lag"],
                  _when(q["last_consume_ms"])] for q in answer["queues"]]  # fmt: skip
        columns = ["topic", "broker", "queue", "broker offset", "consumer offset", "lag", "last consume time"]
        table(f"progress of {answer['group']}", columns, cells, ("queue", "broker offset", "consumer offset", "lag"))
        print(f"total lag: {answer['lag']}")

    return emit(args, progress, render)
