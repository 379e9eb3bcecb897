"""The admin HTTP API's messages and dead letters (RocketMQ's queryMsgById, queryMsgByUniqueKey, queryMsgByKey,
the Dashboard's message search and message trace per group, and the resend of dead letters).

    GET  /admin/messages?topic=T&key=K[&from&to&limit]   by key, newest first (RocketMQ's queryMsgByKey)
    GET  /admin/messages?topic=T&id=UNIQ_ID[&group=G]    by unique id; with a group, its retry and DLQ copies too
    GET  /admin/messages?topic=T&from=..&to=..[&limit]   the first messages stored in the range, oldest first
    GET  /admin/messages/{offset_msg_id}[?group=G]       one message whole (body, properties) and its consumption
                                                         state for G, or for every group consuming its topic
    GET  /admin/dead-letters/{group}[?from&to&start_offset&limit]  a page of the group's dead letters
    POST /admin/dead-letters/{group}/resend              {"ids": [offset msg ids]} | {"msg_id": unique id} |
                                                         {"from": T, "to": T}: each dead letter sent again to the
                                                         topic it died in, once (a second resend is skipped)

Lists show up to 256 bytes of each body; a message's own page shows it whole. `limit` is 1 to 64 (RocketMQ's
maxMsgsNumBatch), 32 by default; dead letters pages hold 1 to 1000.
"""

from __future__ import annotations

from dataclasses import asdict

from aiohttp import web

from core import (
    DEFAULT_QUERY_COUNT,
    DLQ_PREFIX,
    END_OF_TIME_MS,
    MAX_QUERY_COUNT,
    PROPERTY_RETRY_TOPIC,
    RETRY_PREFIX,
    Broker,
    CoreError,
    DeadLetter,
    ResendSummary,
    StoredMessage,
)
from eventbridge.replay_rest import json_object
from mqgate.http.admin_api import CONTEXT_KEY
from mqgate.http.admin_json import add_core_routes, message_json, optional_int, refusal, time_ms

DEAD_LETTER_PAGE = 32
MAX_DEAD_LETTER_PAGE = 1000
MAX_RESEND_IDS = 1000


def add_routes(app: web.Application) -> None:
    routes = [
        ("GET", "/admin/messages", query_messages),
        ("GET", "/admin/messages/{offset_msg_id}", show_message),
        ("GET", "/admin/dead-letters/{group}", list_dead_letters),
        ("POST", "/admin/dead-letters/{group}/resend", resend_dead_letters),
    ]
    add_core_routes(app, routes)


def _broker(request: web.Request) -> Broker:
    return request.app[CONTEXT_KEY].broker


async def query_messages(request: web.Request) -> web.Response:
    query = dict(request.query)
    topic = query.get("topic")
    if not topic:
        raise web.HTTPBadRequest(
            text="give topic=T with key=K, id=UNIQUE_ID or from=/to= (or GET /admin/messages/{offset_msg_id})"
        )
    broker = _broker(request)
    limit = optional_int(query, "limit", 1, MAX_QUERY_COUNT) or DEFAULT_QUERY_COUNT
    begin, end = time_ms(query, "from", 0), time_ms(query, "to", END_OF_TIME_MS)
    await broker.wait_visible()  # what was stored a moment ago is indexed and in its queue
    if query.get("id"):
        group = query.get("group") or None
        found: list[StoredMessage] = broker.queries.by_unique_id(topic, query["id"], group)
        how = "id"
    elif query.get("key"):
        found = broker.queries.by_key(topic, query["key"], begin, end, limit)
        how = "key"
    elif "from" in query or "to" in query:
        found = broker.queries.by_time_range(topic, begin, end, limit)
        how = "time"
    else:
        raise web.HTTPBadRequest(text="give key=K, id=UNIQUE_ID, or a time range from=/to= with the topic")
    return web.json_response({"topic": topic, "by": how, "messages": [message_json(m) for m in found]})


def _consumed_topic(message: StoredMessage) -> str:
    """The topic whose consumers a message belongs to: a retry or dead-letter copy names its first topic."""
    if message.topic.startswith((RETRY_PREFIX, DLQ_PREFIX)):
        return message.properties.get(PROPERTY_RETRY_TOPIC, message.topic)
    return message.topic


async def show_message(request: web.Request) -> web.Response:
    broker = _broker(request)
    message = broker.queries.by_offset_id(request.match_info["offset_msg_id"])
    topic = _consumed_topic(message)
    asked = request.query.get("group")
    groups = [asked] if asked else broker.admin.groups_of(topic)
    tracks = []
    for group in groups:
        entry: dict[str, object] = {"group": group}
        if message.unique_id is None:
            entry.update(state=None, error="the message has no unique id: its consumption cannot be traced")
        else:
            try:
                track = broker.queries.track(group, topic, message.unique_id)
            except CoreError as exc:
                if asked:
                    raise refusal(exc) from None
                entry.update(state=None, error=str(exc))
            else:
                entry.update(
                    state=track.state.value,
                    committed_offset=track.committed_offset,
                    decided_by={"topic": track.record.topic, "queue_offset": track.record.queue_offset},
                )
        tracks.append(entry)
    return web.json_response({"message": message_json(message, None), "consumed_topic": topic, "tracks": tracks})


def _letter_json(letter: DeadLetter) -> dict[str, object]:
    return {
        **message_json(letter.message),
        "original_topic": letter.original_topic,
        "origin_message_id": letter.origin_message_id,
        "reason": letter.reason,
        "resent": letter.resent,
    }


async def list_dead_letters(request: web.Request) -> web.Response:
    group = request.match_info["group"]
    query = dict(request.query)
    limit = optional_int(query, "limit", 1, MAX_DEAD_LETTER_PAGE) or DEAD_LETTER_PAGE
    start = optional_int(query, "start_offset", 0)
    begin, end = time_ms(query, "from", 0), time_ms(query, "to", END_OF_TIME_MS)
    broker = _broker(request)
    page = await broker.dead_letters.list_page(group, begin, end, start, limit)
    topic = f"{DLQ_PREFIX}{group}"
    low, high = broker.min_offset(topic, 0), broker.max_offset(topic, 0)
    return web.json_response(
        {
            "group": group,
            "topic": topic,
            "total": high - low,
            "letters": [_letter_json(letter) for letter in page.letters],
            "next_offset": page.next_offset,
        }
    )


def _summary_json(summary: ResendSummary) -> dict[str, object]:
    outcomes = [{**asdict(outcome), "status": outcome.status.value} for outcome in summary.outcomes]
    return {
        "resent": len(summary.resent),
        "already_resent": len(summary.already_resent),
        "failed": len(summary.failed),
        "stopped": summary.stopped,
        "outcomes": outcomes,
    }


async def resend_dead_letters(request: web.Request) -> web.Response:
    group = request.match_info["group"]
    body = await json_object(request)
    letters = _broker(request).dead_letters
    ids = body.get("ids")
    if ids is not None:
        if (
            not isinstance(ids, list)
            or not 1 <= len(ids) <= MAX_RESEND_IDS
            or not all(isinstance(i, str) and i for i in ids)
        ):
            raise web.HTTPBadRequest(text=f"'ids': give a list of 1 to {MAX_RESEND_IDS} offset message ids")
        outcomes = []
        stopped = None
        for offset_msg_id in ids:
            summary = await letters.resend_by_offset_id(group, offset_msg_id)
            outcomes += summary.outcomes
            if summary.stopped is not None:
                stopped = summary.stopped
                break
        return web.json_response({"group": group, **_summary_json(ResendSummary(outcomes, stopped))})
    if body.get("msg_id"):
        summary = await letters.resend_by_unique_id(group, str(body["msg_id"]))
    elif "from" in body or "to" in body:
        summary = await letters.resend_range(group, time_ms(body, "from", 0), time_ms(body, "to", END_OF_TIME_MS))
    else:
        raise web.HTTPBadRequest(text='give {"ids": [...]}, {"msg_id": ...} or {"from": T, "to": T}')
    return web.json_response({"group": group, **_summary_json(summary)})
