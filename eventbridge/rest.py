"""The EventBridge HTTP API, as aiohttp routes on mqgate's HTTP port.

    POST   /buses/{bus}/events       CloudEvents in binary, structured or batch mode; 200 and a PutEvents answer
                                     per entry: {"FailedEntryCount": n, "Entries": [{"EventId"} | {"ErrorCode",
                                     "ErrorMessage"}]}; events are durable in the core before the answer
    GET    /buses                    [{"name": ...}]
    POST   /buses                    {"name": ...}: 201 (200 if it exists)
    GET    /buses/{bus}              {"name", "topic"}
    DELETE /buses/{bus}              204 (the default bus cannot be deleted)
    GET    /sources                  [{name, bus, mqtt | topic, type, enabled, file, state, forwarded, refused}]
    GET    /rules                    [{bus, name, enabled, description, file, targets: [{id, url, state, ...}]}]
    GET    /rules/{bus}/{name}       one rule, with its targets' delivery counts
    POST   /rules/reload             read the rules directory now: {"rules": n, "errors": ["file:line:col: ..."]}
    POST   /test-event-pattern       {"pattern": {...}, "event": {...}}: {"result": true|false} (AWS
                                     TestEventPattern); an invalid pattern or event is a 400 saying where

Errors are mqgate's `{"error_code": N, "message": "..."}`.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from aiohttp import web

from eventbridge.bus import BusError, bus_topic
from eventbridge.ingress import EntryError, IngressError, parse_events, put_events_response
from eventbridge.matcher import Matcher
from eventbridge.pattern_compiler import compile_pattern
from eventbridge.pattern_errors import PatternError
from eventbridge.rule_file import BUS_NAME
from eventbridge.rule_model import DEFAULT_BUS, Rule
from eventbridge.runtime import EventBridgeRuntime, TargetKey
from eventbridge.transform import event_as_json

log = logging.getLogger(__name__)

# The PutEvents error code of an event refused by the event center (event_schema).
SCHEMA_ERROR_CODE = "SchemaValidationFailed"

RUNTIME_KEY = web.AppKey("eventbridge_runtime", EventBridgeRuntime)


def add_routes(app: web.Application, runtime: EventBridgeRuntime) -> None:
    app[RUNTIME_KEY] = runtime
    app.router.add_post("/buses/{bus}/events", put_events)
    app.router.add_get("/buses", list_buses)
    app.router.add_post("/buses", create_bus)
    app.router.add_get("/buses/{bus}", get_bus)
    app.router.add_delete("/buses/{bus}", delete_bus)
    app.router.add_get("/sources", list_sources)
    app.router.add_get("/rules", list_rules)
    app.router.add_get("/rules/{bus}/{name}", get_rule)
    app.router.add_post("/rules/reload", reload_rules)
    app.router.add_post("/test-event-pattern", test_event_pattern)


def _runtime(request: web.Request) -> EventBridgeRuntime:
    return request.app[RUNTIME_KEY]


def _existing_bus(request: web.Request) -> str:
    bus = request.match_info["bus"]
    if not _runtime(request).buses.exists(bus):
        raise web.HTTPNotFound(text=f"bus {bus!r} does not exist (GET /buses lists them)")
    return bus


async def _json_body(request: web.Request) -> Any:
    try:
        return json.loads(await request.read())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise web.HTTPBadRequest(text=f"the body is not JSON: {exc}") from None


async def put_events(request: web.Request) -> web.Response:
    bus = _existing_bus(request)
    body = await request.read()
    try:
        entries = parse_events(request.headers, body)
    except IngressError as exc:
        raise web.HTTPBadRequest(text=str(exc)) from None
    runtime = _runtime(request)
    accepted: list[dict[str, Any]] = []
    results: list[str | EntryError] = []
    for number, entry in enumerate(entries):
        if isinstance(entry, EntryError):
            results.append(entry)
            continue
        event = event_as_json(entry)
        violation = runtime.schemas.violation(event)
        if violation is not None:
            results.append(EntryError(SCHEMA_ERROR_CODE, f"entry {number}: {violation}"))
            continue
        accepted.append(event)
        results.append(event["id"])
    try:
        await runtime.buses.put(bus, accepted)
    except BusError as exc:
        raise web.HTTPServiceUnavailable(text=f"events not stored, send them again: {exc}") from None
    return web.json_response(put_events_response(results))


async def list_buses(request: web.Request) -> web.Response:
    return web.json_response([{"name": name} for name in _runtime(request).buses.names()])


async def create_bus(request: web.Request) -> web.Response:
    body = await _json_body(request)
    name = body.get("name") if isinstance(body, dict) else None
    if not isinstance(name, str) or BUS_NAME.fullmatch(name) is None:
        raise web.HTTPBadRequest(text="'name': give a bus name of 1 to 64 letters, digits, '_' or '-'")
    buses = _runtime(request).buses
    existed = buses.exists(name)
    buses.create(name)
    return web.json_response({"name": name, "topic": bus_topic(name)}, status=200 if existed else 201)


async def get_bus(request: web.Request) -> web.Response:
    bus = _existing_bus(request)
    return web.json_response({"name": bus, "topic": bus_topic(bus)})


async def delete_bus(request: web.Request) -> web.Response:
    bus = _existing_bus(request)
    runtime = _runtime(request)
    users = sorted(rule.name for rule in runtime.rules if rule.bus == bus)
    if bus == DEFAULT_BUS:
        raise web.HTTPConflict(text=f"bus {DEFAULT_BUS!r} always exists; it cannot be deleted")
    if users:
        raise web.HTTPConflict(text=f"bus {bus!r} has rules ({', '.join(users)}); delete them first")
    runtime.buses.delete(bus)
    return web.Response(status=204)


def _rule_json(runtime: EventBridgeRuntime, rule: Rule) -> dict[str, Any]:
    tasks = runtime.target_tasks()
    targets = []
    for target in rule.targets:
        key = TargetKey(rule.bus, rule.name, target.id)
        task = tasks.get(key)
        entry: dict[str, Any] = {"id": target.id, "url": target.url, "mode": target.mode.value}
        if task is None:
            entry["state"] = "DISABLED"
        else:
            runner = runtime.runner(key)
            stats = task.stats
            entry.update(
                state=runner.state.value,
                matched=stats.matched,
                delivered=stats.delivered,
                retries=stats.retries,
                dead_lettered=stats.dead_lettered,
                last_error=stats.last_error,
                dead_letter_topic=task.dead_letter_topic,
            )
        targets.append(entry)
    return {
        "bus": rule.bus,
        "name": rule.name,
        "enabled": rule.enabled,
        "description": rule.description,
        "file": str(rule.position) if rule.position else None,
        "pattern": rule.pattern.value,
        "targets": targets,
    }


async def list_sources(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    tasks = runtime.source_tasks()
    answer = []
    for name, source in sorted(runtime.rules.sources.items()):
        entry: dict[str, Any] = {"name": name, "bus": source.bus, "type": source.type, "enabled": source.enabled}
        entry.update({"mqtt": source.mqtt} if source.mqtt is not None else {"topic": source.topic})
        entry["file"] = str(source.position) if source.position else None
        task = tasks.get(name)
        if task is None:
            entry["state"] = "DISABLED" if not source.enabled else "NOT_STARTED"
        else:
            entry.update(state=runtime.source_runner(name).state.value, forwarded=task.forwarded, refused=task.refused)
        answer.append(entry)
    return web.json_response(answer)


async def list_rules(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    rules = sorted(runtime.rules, key=lambda rule: (rule.bus, rule.name))
    return web.json_response([_rule_json(runtime, rule) for rule in rules])


async def get_rule(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    bus, name = request.match_info["bus"], request.match_info["name"]
    for rule in runtime.rules:
        if rule.bus == bus and rule.name == name:
            return web.json_response(_rule_json(runtime, rule))
    raise web.HTTPNotFound(text=f"no rule {name!r} on bus {bus!r} (GET /rules lists them)")


async def reload_rules(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    errors = await runtime.reload()
    return web.json_response({"rules": len(runtime.rules), "errors": [str(error) for error in errors]})


async def test_event_pattern(request: web.Request) -> web.Response:
    body = await _json_body(request)
    if not isinstance(body, dict) or "pattern" not in body or "event" not in body:
        raise web.HTTPBadRequest(text='give {"pattern": {...}, "event": {...}}')
    try:
        compiled = compile_pattern(body["pattern"])
    except PatternError as exc:
        raise web.HTTPBadRequest(text=f"invalid pattern: {exc}") from None
    event = body["event"]
    if not isinstance(event, dict):
        raise web.HTTPBadRequest(text="invalid event: it must be a JSON object")
    return web.json_response({"result": bool(Matcher([("pattern", compiled)]).matches(event))})
