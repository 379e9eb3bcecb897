"""The HTTP API of replays and dead letters, as aiohttp routes on mqgate's HTTP port.

    POST /buses/{bus}/replays              {"from": T, "to": T, "rule"?: name, "name"?: replay name, "archive"?:
                                           archive name}: 200 {name, bus, rule, archive, from, to, replayed,
                                           skipped, unmatched, queues: [{queue_id, from_offset, to_offset,
                                           replayed, skipped, unmatched}]}; T is ISO 8601 (naive: UTC) or epoch
                                           milliseconds, a store time, or with "archive" an event time (the
                                           archive's events are replayed; queues is then empty); with "rule", only
                                           the events its pattern matches are replayed (unmatched counts the
                                           others); 404 for an unknown bus, rule or archive, 400 for an archive of
                                           another bus or a rule without a pattern; on a cluster also groups:
                                           [this node's group, then each other group whose node was asked to
                                           replay its own part (its bus topic or its archive), under the same
                                           name, after this one's was done; their counts are in their logs]
    GET  /dead-letters/{topic}             ?limit=100&offset=0: {topic, total, offset, limit, entries: [{id, type,
                                           bus, rule, target, status, error, attempts, origin, store_time,
                                           store_timestamp_ms, queue_id, offset, redriven}]}
    POST /dead-letters/{topic}/redrive     {"rule"?: name, "target"?: id} (rule on the topic's bus, or
                                           "bus/rule"): 200 {topic, redriven, by_target: [{bus, rule, target,
                                           redriven}], skipped_gone, skipped_not_dead_letters, queues: [...]}

{topic} is URL-quoted: `%EVENTBUS-DLQ%default` is `%25EVENTBUS-DLQ%25default`. Errors are mqgate's
`{"error_code": N, "message": "..."}`.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from typing import Any

from aiohttp import web

from eventbridge.archives.replay import Replayer, ReplaySummary
from eventbridge.bus import DEFAULT_DEAD_LETTER_PREFIX, BusError
from eventbridge.errors import NotFoundError, ReprocessError
from eventbridge.rest import active_runtime
from eventbridge.rules.model import RuleKey
from eventbridge.runtime import EventBridgeRuntime
from eventbridge.targets.dead_letters import (
    DEFAULT_LIST_LIMIT,
    DeadLetterPage,
    DeadLetterQueues,
    RedriveFilter,
    RedriveSummary,
)
from eventbridge.time_range import TimeRange, format_ms, parse_time_ms

log = logging.getLogger(__name__)

REPLAYER_KEY = web.AppKey("eventbridge_replayer", Replayer)
DEAD_LETTERS_KEY = web.AppKey("eventbridge_dead_letters", DeadLetterQueues)


def add_routes(app: web.Application, runtime: EventBridgeRuntime) -> None:
    replayer = app[REPLAYER_KEY] = Replayer(runtime)
    runtime.replay_requested = functools.partial(_replay_requested, replayer, set())
    app[DEAD_LETTERS_KEY] = DeadLetterQueues(runtime)
    app.router.add_post("/buses/{bus}/replays", start_replay)
    app.router.add_get("/dead-letters/{topic}", list_dead_letters)
    app.router.add_post("/dead-letters/{topic}/redrive", redrive_dead_letters)


async def json_object(request: web.Request) -> dict[str, Any]:
    """The request's body as a JSON object ({} when empty); 400 saying what is wrong otherwise."""
    text = await request.read()
    if not text.strip():
        return {}
    try:
        body = json.loads(text)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise web.HTTPBadRequest(text=f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="the body must be a JSON object")
    return body


def _optional_string(body: dict[str, Any], field: str) -> str | None:
    value = body.get(field)
    if value is not None and (not isinstance(value, str) or not value):
        raise web.HTTPBadRequest(text=f"{field!r}: give a non-empty string, or leave it out")
    return value


def _refusal(exc: Exception) -> web.HTTPException:
    if isinstance(exc, NotFoundError):
        return web.HTTPNotFound(text=str(exc))
    if isinstance(exc, BusError):
        return web.HTTPServiceUnavailable(text=f"copies not stored ({exc}); what was sent so far stays sent")
    return web.HTTPBadRequest(text=str(exc))


async def start_replay(request: web.Request) -> web.Response:
    body = await json_object(request)
    missing = [field for field in ("from", "to") if field not in body]
    if missing:
        raise web.HTTPBadRequest(text=f'give {{"from": ..., "to": ...}} (missing: {", ".join(missing)})')
    rule, name = _optional_string(body, "rule"), _optional_string(body, "name")
    archive = _optional_string(body, "archive")
    try:
        time_range = TimeRange(parse_time_ms(body["from"], "from"), parse_time_ms(body["to"], "to"))
        replayer = request.app[REPLAYER_KEY]
        active_runtime(replayer.runtime)
        summary = await replayer.replay(request.match_info["bus"], time_range, rule, name, archive)
    except (ReprocessError, BusError) as exc:
        raise _refusal(exc) from None
    answer = replay_json(summary)
    cluster = replayer.runtime.cluster
    if cluster is not None:
        # The other groups' parts, asked once this one's was accepted (and done): under the same name.
        asked = {"bus": summary.bus, "from": time_range.from_ms, "to": time_range.to_ms, "rule": rule,
                 "name": summary.name, "archive": archive}  # fmt: skip
        answer["groups"] = [cluster.group, *await cluster.replay_elsewhere(asked)]
    return web.json_response(answer)


def _replay_requested(replayer: Replayer, running: set[asyncio.Task[None]], request: dict[str, Any]) -> None:
    """Another node's replay: this group's part, run in the background (its counts are logged)."""

    async def run() -> None:
        try:
            time_range = TimeRange(int(request["from"]), int(request["to"]))
            await replayer.replay(str(request["bus"]), time_range, request.get("rule"), request.get("name"),
                                  request.get("archive"))  # fmt: skip
        except (ReprocessError, BusError, KeyError, TypeError, ValueError) as exc:
            log.error("replay %s asked by another node: this group's part not done: %s", request.get("name"), exc)

    task = asyncio.get_running_loop().create_task(run(), name=f"replay {request.get('name')}")
    running.add(task)
    task.add_done_callback(running.discard)


def replay_json(summary: ReplaySummary) -> dict[str, Any]:
    return {
        "name": summary.name,
        "bus": summary.bus,
        "rule": summary.rule,
        "archive": summary.archive.archive if summary.archive else None,
        "from": format_ms(summary.range.from_ms),
        "to": format_ms(summary.range.to_ms),
        "replayed": summary.replayed,
        "skipped": summary.skipped,
        "unmatched": summary.unmatched,
        "queues": [
            {
                "queue_id": queue.queue_id,
                "from_offset": queue.from_offset,
                "to_offset": queue.to_offset,
                "replayed": queue.replayed,
                "skipped": queue.skipped,
                "unmatched": queue.unmatched,
            }
            for queue in summary.queues
        ],
    }


def _query_int(request: web.Request, name: str, default: int) -> int:
    text = request.query.get(name)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise web.HTTPBadRequest(text=f"query parameter {name}={text!r}: give a whole number") from None


async def list_dead_letters(request: web.Request) -> web.Response:
    limit = _query_int(request, "limit", DEFAULT_LIST_LIMIT)
    offset = _query_int(request, "offset", 0)
    try:
        active_runtime(request.app[DEAD_LETTERS_KEY].runtime)
        page = await request.app[DEAD_LETTERS_KEY].listing(request.match_info["topic"], limit, offset)
    except ReprocessError as exc:
        raise _refusal(exc) from None
    return web.json_response(page_json(page))


def page_json(page: DeadLetterPage) -> dict[str, Any]:
    return {
        "topic": page.topic,
        "total": page.total,
        "offset": page.offset,
        "limit": page.limit,
        "entries": [
            {
                "id": listed.letter.id,
                "type": listed.letter.type,
                "bus": listed.letter.bus,
                "rule": listed.letter.rule,
                "target": listed.letter.target,
                "status": listed.letter.status,
                "error": listed.letter.error,
                "attempts": listed.letter.attempts,
                "origin": listed.letter.origin,
                "store_time": format_ms(listed.letter.store_timestamp_ms),
                "store_timestamp_ms": listed.letter.store_timestamp_ms,
                "queue_id": listed.letter.queue_id,
                "offset": listed.letter.offset,
                "redriven": listed.redriven,
            }
            for listed in page.entries
        ],
    }


async def redrive_dead_letters(request: web.Request) -> web.Response:
    topic = request.match_info["topic"]
    body = await json_object(request)
    rule, target = _optional_string(body, "rule"), _optional_string(body, "target")
    if target is not None and rule is None:
        raise web.HTTPBadRequest(text="'target': give its 'rule' too (target ids are per rule)")
    only = RedriveFilter(_rule_key(topic, rule), target) if rule is not None else RedriveFilter()
    try:
        active_runtime(request.app[DEAD_LETTERS_KEY].runtime)
        summary = await request.app[DEAD_LETTERS_KEY].redrive(topic, only)
    except (ReprocessError, BusError) as exc:
        raise _refusal(exc) from None
    return web.json_response(redrive_json(summary))


def _rule_key(topic: str, rule: str) -> RuleKey:
    """`bus/rule`, or a rule name alone on the bus of a default dead-letter topic (the only bus it can be)."""
    bus, slash, name = rule.rpartition("/")
    if slash:
        return RuleKey(bus, name)
    if topic.startswith(DEFAULT_DEAD_LETTER_PREFIX):
        return RuleKey(topic.removeprefix(DEFAULT_DEAD_LETTER_PREFIX), rule)
    raise web.HTTPBadRequest(
        text=f"'rule': {topic!r} may hold dead letters of several buses; name the rule as 'bus/{rule}'"
    )


def redrive_json(summary: RedriveSummary) -> dict[str, Any]:
    return {
        "topic": summary.topic,
        "redriven": summary.total,
        "by_target": [
            {"bus": key.bus, "rule": key.rule, "target": key.target, "redriven": count}
            for key, count in sorted(summary.redriven.items(), key=lambda item: str(item[0]))
        ],
        "skipped_gone": summary.skipped_gone,
        "skipped_not_dead_letters": summary.skipped_not_dead_letters,
        "queues": [
            {"queue_id": queue.queue_id, "from_offset": queue.from_offset, "to_offset": queue.to_offset}
            for queue in summary.queues
        ],
    }
