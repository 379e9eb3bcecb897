"""The admin HTTP API on mqgate's HTTP port: what RocketMQ's mqadmin and Dashboard show and change, for one
`mqgate serve` (the `mqgate admin` commands and the dashboard speak it). Messages and dead letters are in
admin_messages_api.py.

    GET    /admin/topics                     ?kind=all|normal|retry|dlq|system (default: all but light queues)
    POST   /admin/topics                     {"topic", "queues"?, "perm"?, "message_type"?}: 201; 409 if it exists
    GET    /admin/topics/{topic}             its config, route and status: per queue min/max offset, last store time,
                                             and the groups with offsets in it
    PUT    /admin/topics/{topic}             {"read_queues"?, "write_queues"?, "perm"?}
    DELETE /admin/topics/{topic}             the topic, its queues and every group's offsets in it
    GET    /admin/groups                     every group: configured, with offsets or with live members, and its lag
    POST   /admin/groups                     {"group", "retry_max_times"?, "consume_enable"?}: created or updated
    DELETE /admin/groups/{group}             its config and offsets (409 while it has live consumers)
    GET    /admin/groups/{group}/progress    per queue: broker offset, committed offset, lag, last consume time
    POST   /admin/groups/{group}/reset-offset {"topic", "time"}: offsets moved to the first message stored at or
                                             after the time (ISO 8601 or epoch ms; 409 while push consumers live)
    GET    /admin/clients                    MQTT sessions (subscriptions, inflight, queued, node) and core consumers
    GET    /admin/mqtt/cluster               the MQTT gateway on a cluster: the groups, which group's node holds each
                                             persistent session, which groups use each subscription filter
    GET    /admin/store                      statistics, disk usage, file sizes, flush state and the recovery report
    GET    /admin/overview                   counters for the dashboard's overview: totals of the above

Permissions are letters ("rw", "r", "w") or RocketMQ's numbers; times are answered as epoch ms and RFC 3339.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from aiohttp import web

from core import (
    Broker,
    MessageStore,
    MessageType,
    QueueProgress,
    RecoveryReport,
    TopicConfig,
    topic_kind,
)
from eventbridge.replay_rest import json_object
from mqgate.http.admin_json import (
    add_core_routes,
    optional_bool,
    optional_int,
    parse_perm,
    perm_text,
    required_string,
    time_ms,
    when,
)
from mqtt_bridge.client_views import client_views, cluster_view
from mqtt_bridge.gateway import MqttGateway

TOPIC_KINDS = ("normal", "retry", "dlq", "system")


class AdminContext:
    """What the admin routes read: the broker, its store and recovery report, and the MQTT gateway if it runs."""

    def __init__(
        self, broker: Broker, store: MessageStore, recovery: RecoveryReport, gateway: MqttGateway | None
    ) -> None:
        self.broker = broker
        self.store = store
        self.recovery = recovery
        self.gateway = gateway
        self.started_ms = time.time_ns() // 1_000_000


CONTEXT_KEY = web.AppKey("mqgate_admin", AdminContext)


def add_routes(app: web.Application, context: AdminContext) -> None:
    app[CONTEXT_KEY] = context
    routes = [
        ("GET", "/admin/topics", list_topics),
        ("POST", "/admin/topics", create_topic),
        ("GET", "/admin/topics/{topic}", get_topic),
        ("PUT", "/admin/topics/{topic}", update_topic),
        ("DELETE", "/admin/topics/{topic}", delete_topic),
        ("GET", "/admin/groups", list_groups),
        ("POST", "/admin/groups", create_group),
        ("DELETE", "/admin/groups/{group}", delete_group),
        ("GET", "/admin/groups/{group}/progress", group_progress),
        ("POST", "/admin/groups/{group}/reset-offset", reset_offset),
        ("GET", "/admin/clients", list_clients),
        ("GET", "/admin/mqtt/cluster", mqtt_cluster),
        ("GET", "/admin/store", store_report),
        ("GET", "/admin/overview", overview),
    ]
    add_core_routes(app, routes)


def _broker(request: web.Request) -> Broker:
    return request.app[CONTEXT_KEY].broker


# --- topics ------------------------------------------------------------------------------------------------


def _topic_json(broker: Broker, config: TopicConfig) -> dict[str, object]:
    topic = config.topic_name
    messages = sum(
        broker.max_offset(topic, queue_id) - broker.min_offset(topic, queue_id)
        for queue_id in range(config.read_queue_nums)
    )
    return {
        "topic": topic,
        "kind": topic_kind(topic),
        "read_queues": config.read_queue_nums,
        "write_queues": config.write_queue_nums,
        "perm": perm_text(config.perm),
        "message_type": config.message_type.value,
        "messages": messages,
    }


async def list_topics(request: web.Request) -> web.Response:
    kind = request.query.get("kind", "all")
    if kind not in ("all", *TOPIC_KINDS):
        raise web.HTTPBadRequest(text=f"kind {kind!r}: give all, {', '.join(TOPIC_KINDS)}")
    broker = _broker(request)
    topics = [
        _topic_json(broker, config)
        for config in broker.topic_configs()
        if kind == "all" or topic_kind(config.topic_name) == kind
    ]
    return web.json_response({"topics": topics})


async def create_topic(request: web.Request) -> web.Response:
    body = await json_object(request)
    topic = required_string(body, "topic")
    broker = _broker(request)
    if broker.has_topic(topic):
        raise web.HTTPConflict(text=f"topic {topic!r} exists; change it with PUT /admin/topics/{topic}")
    queues = optional_int(body, "queues", 1)
    perm = parse_perm(body["perm"]) if "perm" in body else parse_perm("rw")
    type_name = body.get("message_type", MessageType.NORMAL.value)
    try:
        message_type = MessageType(type_name)
    except ValueError:
        allowed = ", ".join(member.value for member in MessageType)
        raise web.HTTPBadRequest(text=f"'message_type': {type_name!r}; give one of {allowed}") from None
    config = broker.create_topic(topic, queues, message_type, perm)
    return web.json_response(_topic_json(broker, config), status=201)


async def get_topic(request: web.Request) -> web.Response:
    topic = request.match_info["topic"]
    broker = _broker(request)
    status = broker.admin.topic_status(topic)
    route = broker.route(topic)
    groups = broker.admin.groups_of(topic)
    return web.json_response(
        {
            **_topic_json(broker, route.config),
            "readable": route.readable,
            "writable": route.writable,
            "queues": [
                {
                    **asdict(queue),
                    "last_update": when(queue.last_update_ms),
                    "messages": queue.max_offset - queue.min_offset,
                }
                for queue in status
            ],
            "groups": groups,
        }
    )


async def update_topic(request: web.Request) -> web.Response:
    topic = request.match_info["topic"]
    body = await json_object(request)
    unknown = set(body) - {"read_queues", "write_queues", "perm"}
    if unknown:
        raise web.HTTPBadRequest(text=f"unknown fields {sorted(unknown)}; give read_queues, write_queues or perm")
    broker = _broker(request)
    config = broker.admin.update_topic(
        topic,
        read_queue_nums=optional_int(body, "read_queues", 1),
        write_queue_nums=optional_int(body, "write_queues", 1),
        perm=parse_perm(body["perm"]) if "perm" in body else None,
    )
    return web.json_response(_topic_json(broker, config))


async def delete_topic(request: web.Request) -> web.Response:
    topic = request.match_info["topic"]
    _broker(request).admin.delete_topic(topic)
    return web.json_response({"deleted": topic})


# --- groups ------------------------------------------------------------------------------------------------


def _progress_json(queue: QueueProgress) -> dict[str, object]:
    return {**asdict(queue), "last_consume": when(queue.last_consume_ms)}


async def list_groups(request: web.Request) -> web.Response:
    broker = _broker(request)
    admin = broker.admin
    groups = []
    for group in admin.groups():
        config = admin.group_config(group)
        progress = admin.consumer_progress(group, last_consume=False)
        groups.append(
            {
                "group": group,
                "configured": config is not None,
                "consume_enable": config.consume_enable if config is not None else True,
                "retry_max_times": config.retry_max_times if config is not None else None,
                "members": len(admin.members(group)),
                "topics": sorted({queue.topic for queue in progress}),
                "lag": sum(queue.lag for queue in progress),
            }
        )
    return web.json_response({"groups": groups})


async def create_group(request: web.Request) -> web.Response:
    body = await json_object(request)
    group = required_string(body, "group")
    admin = _broker(request).admin
    existed = admin.group_config(group) is not None
    config = admin.create_group(
        group,
        retry_max_times=optional_int(body, "retry_max_times", 0),
        consume_enable=optional_bool(body, "consume_enable"),
    )
    answer = {
        "group": config.group_name,
        "consume_enable": config.consume_enable,
        "retry_max_times": config.retry_max_times,
        "created": not existed,
    }
    return web.json_response(answer, status=200 if existed else 201)


async def delete_group(request: web.Request) -> web.Response:
    group = request.match_info["group"]
    _broker(request).admin.delete_group(group)
    return web.json_response({"deleted": group})


async def group_progress(request: web.Request) -> web.Response:
    group = request.match_info["group"]
    admin = _broker(request).admin
    queues = admin.consumer_progress(group)
    members = [asdict(member) for member in admin.members(group)]
    return web.json_response(
        {
            "group": group,
            "lag": sum(queue.lag for queue in queues),
            "queues": [_progress_json(queue) for queue in queues],
            "members": members,
        }
    )


async def reset_offset(request: web.Request) -> web.Response:
    group = request.match_info["group"]
    body = await json_object(request)
    topic = required_string(body, "topic")
    if "time" not in body:
        raise web.HTTPBadRequest(text='give {"topic": ..., "time": ISO 8601 or epoch ms}')
    timestamp = time_ms(body, "time", 0)
    offsets = _broker(request).admin.reset_offsets_by_time(group, topic, timestamp)
    return web.json_response(
        {"group": group, "topic": topic, "time": when(timestamp), "offsets": {str(q): o for q, o in offsets.items()}}
    )


# --- clients -----------------------------------------------------------------------------------------------


async def list_clients(request: web.Request) -> web.Response:
    context = request.app[CONTEXT_KEY]
    mqtt: list[dict[str, Any]] = []
    if context.gateway is not None:
        for view in client_views(context.gateway):
            entry = asdict(view)
            entry["disconnected_at"] = when(view.disconnected_at_ms)
            mqtt.append(entry)
    consumers = [asdict(member) for member in context.broker.admin.members()]
    return web.json_response({"mqtt_enabled": context.gateway is not None, "mqtt": mqtt, "consumers": consumers})


async def mqtt_cluster(request: web.Request) -> web.Response:
    """The MQTT gateway on the cluster as this node knows it: the groups, which group's node holds each persistent
    session (and this node's clean ones), and which groups use each subscription filter."""
    context = request.app[CONTEXT_KEY]
    if context.gateway is None:
        return web.json_response({"mqtt_enabled": False})
    return web.json_response({"mqtt_enabled": True, **asdict(cluster_view(context.gateway))})


# --- store -------------------------------------------------------------------------------------------------


def _tree_size(path: Path) -> int:
    total = 0
    try:
        entries = list(os.scandir(path))
    except OSError:
        return 0
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                total += _tree_size(Path(entry.path))
            else:
                total += entry.stat(follow_symlinks=False).st_blocks * 512
        except OSError:
            continue
    return total


def _disk(store_dir: Path) -> dict[str, object]:
    """Bytes on disk under each part of the store (blocks allocated: sparse segments count what they hold), and
    the file system's use. Walks the directories: run in a thread."""
    sizes = {}
    total = 0
    for entry in sorted(os.scandir(store_dir), key=lambda e: e.name) if store_dir.is_dir() else []:
        size = _tree_size(Path(entry.path)) if entry.is_dir() else entry.stat().st_blocks * 512
        sizes[entry.name] = size
        total += size
    usage = shutil.disk_usage(store_dir)
    return {
        "store_bytes": total,
        "parts": sizes,
        "filesystem": {
            "total_bytes": usage.total,
            "used_bytes": usage.used,
            "free_bytes": usage.free,
            "used_ratio": round(usage.used / usage.total, 4) if usage.total else 0.0,
        },
    }


async def store_report(request: web.Request) -> web.Response:
    context = request.app[CONTEXT_KEY]
    store = context.store
    config = store.config
    stats = store.stats()
    disk = await asyncio.to_thread(_disk, Path(config.store_dir))
    report = context.recovery
    return web.json_response(
        {
            "store_dir": str(config.store_dir),
            "flush_mode": config.flush_mode.value,
            "stats": stats,
            "unflushed_bytes": stats["commit_log_max_offset"] - stats["flushed_offset"],
            "undispatched_bytes": stats["commit_log_max_offset"] - stats["dispatched_offset"],
            "disk": disk,
            "recovery": {
                "clean": report.clean,
                "start": report.start,
                "end": report.end,
                "records_scanned": report.records_scanned,
                "truncated_bytes": report.truncated_bytes,
                "corrupt_regions": [
                    {"file": str(path), "file_offset": offset, "skipped_bytes": skipped}
                    for path, offset, skipped in report.corrupt
                ],
                "consume_queue_entries_dropped": report.consume_queue_entries_dropped,
                "seconds": round(report.seconds, 3),
            },
        }
    )


# --- overview ----------------------------------------------------------------------------------------------


async def overview(request: web.Request) -> web.Response:
    """Totals a dashboard polls to draw rates: messages stored (commit-log end), topics, groups, connections."""
    context = request.app[CONTEXT_KEY]
    broker = context.broker
    stats = context.store.stats()
    topics = broker.topic_configs()
    messages = 0
    for config in topics:
        for queue_id in range(config.read_queue_nums):
            messages += broker.max_offset(config.topic_name, queue_id)
    gateway = context.gateway
    sessions = client_views(gateway) if gateway is not None else []
    return web.json_response(
        {
            "now_ms": time.time_ns() // 1_000_000,
            "started_ms": context.started_ms,
            "commit_log_bytes": stats["commit_log_max_offset"],
            "messages_stored": messages,
            "topics": sum(1 for config in topics if topic_kind(config.topic_name) == "normal"),
            "groups": len(broker.admin.groups()),
            "mqtt_connected": sum(1 for view in sessions if view.connected),
            "mqtt_sessions": len(sessions),
            "consumers": len(broker.admin.members()),
        }
    )
