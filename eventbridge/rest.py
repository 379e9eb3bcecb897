"""The EventBridge HTTP API, as aiohttp routes on mqgate's HTTP port.

    POST   /buses/{bus}/events       CloudEvents in binary, structured or batch mode; 200 and a PutEvents answer
                                     per entry: {"FailedEntryCount": n, "Entries": [{"EventId"} | {"ErrorCode",
                                     "ErrorMessage"}]}; events are durable in the core before the answer
    GET    /buses                    [{"name": ...}]
    POST   /buses                    {"name": ...}: 201 (200 if it exists)
    GET    /buses/{bus}              {"name", "topic"}
    DELETE /buses/{bus}              204 (the default bus cannot be deleted)
    GET    /sources                  [{name, bus, mqtt | topic, type, enabled, file, state, forwarded, refused}]
    GET    /rules                    {"rules": [{bus, name, enabled, description, file, file_error, pattern,
                                     schedule, targets: [{id, url, state, ...}]}], "refused": [{file, line,
                                     column, reason, error, rules}]}; a scheduled rule also has schedule_state:
                                     {state (SCHEDULED, ENDED, DISABLED), next_fire, fires, missed, last_error};
                                     refused are the rule files not loaded, with their error and the rules they
                                     name; file_error is set on a rule whose file was refused since it was loaded
    GET    /rules/{bus}/{name}       one rule, with its targets' delivery counts; 404 saying so when the file
                                     naming it was refused
    PUT    /rules/{bus}/{name}       create or replace a rule: the rule as in a rule file, in JSON ({"pattern",
                                     "schedule", "targets", ...}; name and bus come from the path; a pattern, a
                                     schedule or both): 201 or 200 and the rule
    DELETE /rules/{bus}/{name}       204
    PUT    /rules/{bus}/{name}/enable|disable                 200 and the rule
    PUT    /rules/{bus}/{name}/targets/{id}                   add or replace one target ({"type", "url", ...})
    DELETE /rules/{bus}/{name}/targets/{id}                   204 (a rule keeps at least one target)
    PUT    /sources/{name}           create or replace an event source ({"mqtt"} or {"topic"}, "bus", "type")
    DELETE /sources/{name}           204
    PUT    /sources/{name}/enable|disable                     200 and the source
    GET    /archives                 [{name, bus, description, pattern, retention_days, file, state, reason,
                                     last_error, event_count, size_bytes, segments, oldest_event_time,
                                     newest_event_time}] (times are the events' `time`)
    GET    /archives/{name}          one archive
    PUT    /archives/{name}          create or change an archive ({"bus", "description", "pattern",
                                     "retention_days"}, as in a rule file): 201 or 200 and the archive; 409 for
                                     another bus than it has (an archive keeps its bus)
    DELETE /archives/{name}          204: stopped, and its files deleted with its events (AWS DeleteArchive)
    POST   /rules/reload             read the rules directory now: {"rules": n, "errors": ["file:line:col: ..."]}
    POST   /test-event-pattern       {"pattern": {...}, "event": {...}}: {"result": true|false} (AWS
                                     TestEventPattern); an invalid pattern or event is a 400 saying where

Rules, sources and archives written through the API are files of the rules directory (api_definitions); those of
an operator's file are changed in the file (409 names it). Errors are mqgate's `{"error_code": N, "message": "..."}`.
"""

from __future__ import annotations

import functools
import json
import logging
from pathlib import Path
from typing import Any

from aiohttp import web

from eventbridge.archives.filler import ArchiveState
from eventbridge.bus import BusError, bus_topic
from eventbridge.errors import RuleFileError
from eventbridge.event_form import event_as_json
from eventbridge.ingress import EntryError, IngressError, parse_events, put_events_response
from eventbridge.patterns.compiler import compile_pattern
from eventbridge.patterns.errors import PatternError
from eventbridge.patterns.matcher import Matcher
from eventbridge.rules.api_definitions import (
    DefinitionError,
    archive_file_path,
    is_api_file,
    read_definition,
    rule_file_path,
    source_file_path,
    write_definition,
)
from eventbridge.rules.model import DEFAULT_BUS, HttpTarget, MqttTarget, Rule, RuleKey, Target, TopicTarget
from eventbridge.rules.rule_file import BUS_NAME
from eventbridge.runtime import EventBridgeRuntime, TargetKey
from eventbridge.schedules.scheduler import rfc3339
from eventbridge.time_range import format_ms

log = logging.getLogger(__name__)

# The PutEvents error code of an event refused by the event center (event_schema).
SCHEMA_ERROR_CODE = "SchemaValidationFailed"
# Put errors counted (EventBridgeRuntime.put_errors) besides the entry and request codes of ingress.py: a put to a
# bus that does not exist (404), events the store refused (503).
BUS_NOT_FOUND_CODE = "BusNotFound"
NOT_STORED_CODE = "NotStored"

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
    app.router.add_put("/rules/{bus}/{name}", put_rule)
    app.router.add_delete("/rules/{bus}/{name}", delete_rule)
    app.router.add_put("/rules/{bus}/{name}/enable", functools.partial(enable_rule, enabled=True))
    app.router.add_put("/rules/{bus}/{name}/disable", functools.partial(enable_rule, enabled=False))
    app.router.add_put("/rules/{bus}/{name}/targets/{target}", put_target)
    app.router.add_delete("/rules/{bus}/{name}/targets/{target}", delete_target)
    app.router.add_put("/sources/{name}", put_source)
    app.router.add_delete("/sources/{name}", delete_source)
    app.router.add_put("/sources/{name}/enable", functools.partial(enable_source, enabled=True))
    app.router.add_put("/sources/{name}/disable", functools.partial(enable_source, enabled=False))
    app.router.add_get("/archives", list_archives)
    app.router.add_get("/archives/{name}", get_archive)
    app.router.add_put("/archives/{name}", put_archive)
    app.router.add_delete("/archives/{name}", delete_archive)
    app.router.add_post("/rules/reload", reload_rules)
    app.router.add_post("/test-event-pattern", test_event_pattern)


def _runtime(request: web.Request) -> EventBridgeRuntime:
    return active_runtime(request.app[RUNTIME_KEY])


def active_runtime(runtime: EventBridgeRuntime) -> EventBridgeRuntime:
    """The runtime, or 503 while it does not run (under automatic failover: while its broker is a slave)."""
    if not runtime.active:
        raise web.HTTPServiceUnavailable(
            text=f"EventBridge runs on the master of broker group {runtime.broker.config.broker_name}, and this"
            " broker is not it now: ask the master (the NameServers' routes name it)"
        )
    return runtime


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
    runtime = _runtime(request)
    try:
        bus = _existing_bus(request)
    except web.HTTPNotFound:
        runtime.count_put_error(BUS_NOT_FOUND_CODE)
        raise
    body = await request.read()
    try:
        entries = parse_events(request.headers, body)
    except IngressError as exc:
        runtime.count_put_error(exc.code)  # the whole request: counted once
        raise web.HTTPBadRequest(text=str(exc)) from None
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
    for result in results:
        if isinstance(result, EntryError):
            runtime.count_put_error(result.code)
    try:
        await runtime.buses.put(bus, accepted)
    except BusError as exc:
        runtime.count_put_error(NOT_STORED_CODE, len(accepted))
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
    archives = sorted(name for name, archive in runtime.rules.archives.items() if archive.bus == bus)
    if archives:
        raise web.HTTPConflict(text=f"bus {bus!r} has archives ({', '.join(archives)}); delete them first")
    runtime.buses.delete(bus)
    return web.Response(status=204)


def _target_json(target: Target) -> dict[str, Any]:
    if isinstance(target, HttpTarget):
        return {"id": target.id, "type": "http", "url": target.url, "mode": target.mode.value}
    if isinstance(target, TopicTarget):
        return {"id": target.id, "type": "topic", "topic": target.topic, "mode": target.mode.value, "tag": target.tag}
    if isinstance(target, MqttTarget):
        return {"id": target.id, "type": "mqtt", "topic": target.topic.text, "qos": target.qos,
                "retain": target.retain, "mode": target.mode.value}  # fmt: skip
    return {"id": target.id, "type": "bus", "bus": target.bus}


def _rule_json(runtime: EventBridgeRuntime, rule: Rule) -> dict[str, Any]:
    tasks = runtime.target_tasks()
    targets = []
    for target in rule.targets:
        key = TargetKey(rule.bus, rule.name, target.id)
        task = tasks.get(key)
        entry = _target_json(target)
        if runtime.cluster is not None and rule.enabled:
            entry["node"] = runtime.node_of(key)  # the broker group whose node runs it
        if task is None:
            entry["state"] = _not_running_state(runtime, rule, key)
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
        # The rule in force is from before its file was changed and refused: what the file says now is not running.
        "file_error": str(refused) if (refused := _file_refusal(runtime, rule)) is not None else None,
        "pattern": rule.pattern.value if rule.pattern is not None else None,
        "schedule": str(rule.schedule) if rule.schedule is not None else None,
        **({"schedule_state": _schedule_json(runtime, rule)} if rule.schedule is not None else {}),
        "targets": targets,
    }


def _not_running_state(runtime: EventBridgeRuntime, rule: Rule, key: TargetKey) -> str:
    """DISABLED; on a cluster, ELSEWHERE for a target another node runs (its counts are there), STARTING for one
    this node is about to start (HANDOVER_S after it gained it)."""
    if not rule.enabled:
        return "DISABLED"
    if runtime.cluster is not None and runtime.node_of(key) != runtime.cluster.group:
        return "ELSEWHERE"
    return "STARTING"


def _schedule_json(runtime: EventBridgeRuntime, rule: Rule) -> dict[str, Any]:
    state = runtime.scheduler.state(rule.key)
    if state is None:
        return {"state": "DISABLED", "next_fire": None}
    return {
        "state": "SCHEDULED" if state.next_fire is not None else "ENDED",
        "next_fire": rfc3339(state.next_fire) if state.next_fire is not None else None,
        "fires": state.fires,
        "missed": state.missed,
        "last_error": state.last_error,
    }


async def list_sources(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    return web.json_response([_source_json(runtime, name) for name in sorted(runtime.rules.sources)])


def _file_refusal(runtime: EventBridgeRuntime, rule: Rule) -> RuleFileError | None:
    return runtime.refusal_of_file(rule.position.path) if rule.position is not None else None


def _refused_json(runtime: EventBridgeRuntime, error: RuleFileError) -> dict[str, Any]:
    return {
        "file": error.path,
        "line": error.line,
        "column": error.column,
        "reason": error.reason,
        "error": str(error),
        "rules": [str(key) for key in runtime.declared_by(error)],
    }


async def list_rules(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    rules = sorted(runtime.rules, key=lambda rule: (rule.bus, rule.name))
    return web.json_response(
        {
            "rules": [_rule_json(runtime, rule) for rule in rules],
            "refused": [_refused_json(runtime, error) for error in runtime.errors],
        }
    )


async def get_rule(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    bus, name = request.match_info["bus"], request.match_info["name"]
    for rule in runtime.rules:
        if rule.bus == bus and rule.name == name:
            return web.json_response(_rule_json(runtime, rule))
    raise web.HTTPNotFound(text=_missing_rule(runtime, RuleKey(bus, name)))


def _missing_rule(runtime: EventBridgeRuntime, key: RuleKey) -> str:
    """Why there is no rule `key`: the refused file that names it, else every refused file (one that could not be
    read as YAML may hold it), else plainly none."""
    refused = runtime.refusal_naming(key)
    if refused is not None:
        return (
            f"rule {key.name!r} on bus {key.bus!r} is not in force: its file was refused: {refused}. Fix the file; "
            "mqgate reads it again once it changes (GET /rules lists refused files)"
        )
    text = f"no rule {key.name!r} on bus {key.bus!r} (GET /rules lists them)"
    if runtime.errors:
        text += "; refused rule files, which may be meant to define it: " + "; ".join(map(str, runtime.errors))
    return text


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


# --- rules and sources written through the API ---------------------------------------------------------------


def _find_rule(runtime: EventBridgeRuntime, bus: str, name: str) -> Rule | None:
    return next((rule for rule in runtime.rules if rule.bus == bus and rule.name == name), None)


def _owned_file(position: object, what: str) -> None:
    """Refuse to change a definition that an operator's file holds."""
    path = getattr(position, "path", None)
    if path is not None and not is_api_file(path):
        raise web.HTTPConflict(text=f"{what} is defined in {path}; change it there (the API changes only its own)")


async def _apply(runtime: EventBridgeRuntime, path: Path, kind: str, definition: dict[str, Any]) -> None:
    try:
        write_definition(path, kind, definition)
    except DefinitionError as exc:
        raise web.HTTPBadRequest(text=str(exc)) from None
    errors = [error for error in await runtime.reload() if Path(error.path) == path]
    if errors:
        # Valid alone but not next to the others (a name another file defines): undo, say why.
        path.unlink(missing_ok=True)
        await runtime.reload()
        raise web.HTTPConflict(text=errors[0].reason)


async def _delete_definition(runtime: EventBridgeRuntime, path: Path) -> web.Response:
    path.unlink(missing_ok=True)
    await runtime.reload()
    return web.Response(status=204)


async def _definition_body(request: web.Request) -> dict[str, Any]:
    body = await _json_body(request)
    if not isinstance(body, dict):
        raise web.HTTPBadRequest(text="the body must be a JSON object")
    return body


async def put_rule(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    bus, name = request.match_info["bus"], request.match_info["name"]
    existing = _find_rule(runtime, bus, name)
    if existing is not None:
        _owned_file(existing.position, f"rule {existing.key}")
    definition = {**await _definition_body(request), "name": name, "bus": bus}
    await _apply(runtime, rule_file_path(runtime.rules_dir, bus, name), "rules", definition)
    rule = _find_rule(runtime, bus, name)
    assert rule is not None
    return web.json_response(_rule_json(runtime, rule), status=200 if existing else 201)


def _api_rule(runtime: EventBridgeRuntime, request: web.Request) -> tuple[Path, dict[str, Any]]:
    bus, name = request.match_info["bus"], request.match_info["name"]
    rule = _find_rule(runtime, bus, name)
    if rule is None:
        raise web.HTTPNotFound(text=f"no rule {name!r} on bus {bus!r} (GET /rules lists them)")
    _owned_file(rule.position, f"rule {rule.key}")
    path = rule_file_path(runtime.rules_dir, bus, name)
    return path, read_definition(path, "rules")


async def delete_rule(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    path, _ = _api_rule(runtime, request)
    return await _delete_definition(runtime, path)


async def enable_rule(request: web.Request, *, enabled: bool) -> web.Response:
    runtime = _runtime(request)
    path, definition = _api_rule(runtime, request)
    await _apply(runtime, path, "rules", {**definition, "enabled": enabled})
    rule = _find_rule(runtime, request.match_info["bus"], request.match_info["name"])
    assert rule is not None
    return web.json_response(_rule_json(runtime, rule))


async def put_target(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    path, definition = _api_rule(runtime, request)
    target_id = request.match_info["target"]
    target = {**await _definition_body(request), "id": target_id}
    targets = [t for t in definition.get("targets", []) if t.get("id") != target_id]
    existed = len(targets) != len(definition.get("targets", []))
    await _apply(runtime, path, "rules", {**definition, "targets": [*targets, target]})
    rule = _find_rule(runtime, request.match_info["bus"], request.match_info["name"])
    assert rule is not None
    return web.json_response(_rule_json(runtime, rule), status=200 if existed else 201)


async def delete_target(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    path, definition = _api_rule(runtime, request)
    target_id = request.match_info["target"]
    targets = [t for t in definition.get("targets", []) if t.get("id") != target_id]
    if len(targets) == len(definition.get("targets", [])):
        raise web.HTTPNotFound(text=f"the rule has no target {target_id!r}")
    if not targets:
        raise web.HTTPConflict(text="a rule keeps at least one target; delete the rule instead")
    await _apply(runtime, path, "rules", {**definition, "targets": targets})
    return web.Response(status=204)


def _source_json(runtime: EventBridgeRuntime, name: str) -> dict[str, Any]:
    source = runtime.rules.sources[name]
    entry: dict[str, Any] = {"name": name, "bus": source.bus, "type": source.type, "enabled": source.enabled}
    entry.update({"mqtt": source.mqtt} if source.mqtt is not None else {"topic": source.topic})
    entry["file"] = str(source.position) if source.position else None
    task = runtime.source_tasks().get(name)
    if task is None:
        entry["state"] = "DISABLED" if not source.enabled else "NOT_STARTED"
    else:
        entry.update(state=runtime.source_runner(name).state.value, forwarded=task.forwarded, refused=task.refused)
    return entry


async def put_source(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    name = request.match_info["name"]
    existing = runtime.rules.sources.get(name)
    if existing is not None:
        _owned_file(existing.position, f"source {name!r}")
    definition = {**await _definition_body(request), "name": name}
    await _apply(runtime, source_file_path(runtime.rules_dir, name), "sources", definition)
    return web.json_response(_source_json(runtime, name), status=200 if existing else 201)


def _api_source(runtime: EventBridgeRuntime, request: web.Request) -> tuple[Path, dict[str, Any]]:
    name = request.match_info["name"]
    source = runtime.rules.sources.get(name)
    if source is None:
        raise web.HTTPNotFound(text=f"no source {name!r} (GET /sources lists them)")
    _owned_file(source.position, f"source {name!r}")
    path = source_file_path(runtime.rules_dir, name)
    return path, read_definition(path, "sources")


async def delete_source(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    path, _ = _api_source(runtime, request)
    return await _delete_definition(runtime, path)


async def enable_source(request: web.Request, *, enabled: bool) -> web.Response:
    runtime = _runtime(request)
    path, definition = _api_source(runtime, request)
    await _apply(runtime, path, "sources", {**definition, "enabled": enabled})
    return web.json_response(_source_json(runtime, request.match_info["name"]))


# --- archives ------------------------------------------------------------------------------------------------


def _archive_json(runtime: EventBridgeRuntime, name: str) -> dict[str, Any]:
    archive = runtime.rules.archives[name]
    filler = runtime.archives().get(name)
    stats = filler.stats() if filler is not None else None
    return {
        "name": name,
        "bus": archive.bus,
        "description": archive.description,
        "pattern": archive.pattern.value if archive.pattern is not None else None,
        "retention_days": archive.retention_days,
        "file": str(archive.position) if archive.position else None,
        # No filler yet: the definition is read, its filler not made (the next reload step makes it).
        "state": filler.state.value if filler is not None else ArchiveState.CREATING.value,
        "reason": filler.reason if filler is not None else None,
        "last_error": filler.last_error if filler is not None else None,
        "event_count": stats.events if stats else 0,
        "size_bytes": stats.size_bytes if stats else 0,
        "segments": stats.segments if stats else 0,
        "oldest_event_time": format_ms(stats.oldest_event_ms) if stats and stats.oldest_event_ms is not None else None,
        "newest_event_time": format_ms(stats.newest_event_ms) if stats and stats.newest_event_ms is not None else None,
    }


def _known_archive(runtime: EventBridgeRuntime, request: web.Request) -> str:
    name = request.match_info["name"]
    if name not in runtime.rules.archives:
        raise web.HTTPNotFound(text=f"no archive {name!r} (GET /archives lists them)")
    return name


async def list_archives(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    return web.json_response([_archive_json(runtime, name) for name in sorted(runtime.rules.archives)])


async def get_archive(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    return web.json_response(_archive_json(runtime, _known_archive(runtime, request)))


async def put_archive(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    name = request.match_info["name"]
    definition = {**await _definition_body(request), "name": name}
    existing = runtime.rules.archives.get(name)
    if existing is not None:
        _owned_file(existing.position, f"archive {name!r}")
        bus = definition.get("bus", DEFAULT_BUS)
        if bus != existing.bus:
            raise web.HTTPConflict(
                text=f"archive {name!r} holds events of bus {existing.bus!r}, not {bus!r}: an archive keeps its bus; "
                "delete it (its events go with it) and create it again"
            )
    await _apply(runtime, archive_file_path(runtime.rules_dir, name), "archives", definition)
    return web.json_response(_archive_json(runtime, name), status=200 if existing else 201)


async def delete_archive(request: web.Request) -> web.Response:
    runtime = _runtime(request)
    name = _known_archive(runtime, request)
    _owned_file(runtime.rules.archives[name].position, f"archive {name!r}")
    return await _delete_definition(runtime, archive_file_path(runtime.rules_dir, name))
