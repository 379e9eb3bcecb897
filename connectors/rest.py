"""The connector REST API in Kafka Connect's shape, as aiohttp routes on mqgate's HTTP port.

    GET    /connectors                       names; ?expand=status and/or ?expand=info: {name: {status, info}}
    POST   /connectors                       {"name": ..., "config": {...}}: 201 and the connector's info
    GET    /connectors/{name}                info: {name, config, tasks: [{connector, task}], type}
    PUT    /connectors/{name}                create or replace ({"config": {...}} or the flat config): 201 or 200
    DELETE /connectors/{name}                204
    GET    /connectors/{name}/config         the flat config
    PUT    /connectors/{name}/config         create or replace with the flat config: 201 or 200, and the info
    GET    /connectors/{name}/status         {name, connector: {state, worker_id, trace?}, tasks: [...], type}
    GET    /connectors/{name}/tasks          [{id: {connector, task}, config}]
    PUT    /connectors/{name}/pause|resume   202
    POST   /connectors/{name}/restart        ?includeTasks=true&onlyFailed=true: 202 and the status; else 204
    GET    /connector-plugins                [{class, name, type, version}]
    PUT    /connector-plugins/{plugin}/config/validate   the flat config: Kafka Connect's ConfigInfos

Errors are `{"error_code": N, "message": "..."}`; an invalid config is a 400 whose body also lists
`"errors": [{"key": ..., "message": ...}]`, one per bad key. Config values are strings; numbers and booleans
in a JSON body are taken as their string form (`"tasks.max": 2` is `"2"`), as Kafka Connect takes them.
Values of PASSWORD keys are shown as "[hidden]".
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from connectors.errors import ConnectorError, InvalidConfig
from connectors.plugins import PluginNotFound, PluginRegistry
from connectors.validation import mask_secrets, validation_response
from connectors.worker import ConnectorInfo, ConnectorStatus, Worker

log = logging.getLogger(__name__)


class WorkerSlot:
    """The worker the API serves: under automatic failover, the one of the broker's term as master (None while it
    is a slave: the API answers 503, naming its group's master)."""

    def __init__(self, worker: Worker | None, group: str) -> None:
        self.worker = worker
        self.group = group


WORKER_KEY = web.AppKey("connect_worker", WorkerSlot)
EXPANDS = ("status", "info")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class RequestError(ConnectorError, ValueError):
    """The request cannot be served as sent (HTTP `status`, usually 400)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = self.http_status = status


def error_response(status: int, message: str, **extra: Any) -> web.Response:
    return web.json_response({"error_code": status, "message": message, **extra}, status=status)


def _answers_errors(handler: Handler) -> Handler:
    """Turns the runtime's errors and RequestError into Kafka Connect's JSON error bodies."""

    @functools.wraps(handler)
    async def wrapped(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except InvalidConfig as exc:
            errors = [{"key": error.key, "message": error.message} for error in exc.errors]
            return error_response(exc.http_status, str(exc), errors=errors)
        except RequestError as exc:  # a ConnectorError too: answered with its own status
            return error_response(exc.status, str(exc))
        except ConnectorError as exc:
            if exc.http_status >= 500:
                log.error("%s %s: %s", request.method, request.path, exc)
            return error_response(exc.http_status, str(exc))

    return wrapped


# --- reading requests ------------------------------------------------------------------------------------


async def read_json(request: web.Request) -> Any:
    """The body as JSON, or RequestError naming the problem and where it is."""
    text = await request.text()
    if not text.strip():
        raise RequestError("the request body is empty; expected JSON")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:  # its message carries "line L column C (char N)"
        raise RequestError(f"invalid JSON body: {exc}") from None


def as_config(value: object, where: str = "the body") -> dict[str, str]:
    """A JSON object as a flat string config (scalars become their config strings)."""
    if not isinstance(value, dict):
        raise RequestError(f"{where}: expected a JSON object of config keys, got {_json_type(value)}")
    config = {}
    for key, item in value.items():
        if isinstance(item, bool):
            config[key] = "true" if item else "false"
        elif isinstance(item, str | int | float):
            config[key] = str(item)
        else:
            raise RequestError(f"{where}: config key {key!r}: expected a string, got {_json_type(item)}")
    return config


def _json_type(value: object) -> str:
    return {dict: "an object", list: "an array", type(None): "null", str: "a string", bool: "a boolean"}.get(
        type(value), "a number"
    )


def _flag(request: web.Request, name: str) -> bool:
    raw = request.query.get(name, "false").strip().lower()
    if raw not in ("true", "false"):
        raise RequestError(f"query parameter {name}={request.query[name]!r}: expected true or false")
    return raw == "true"


# --- writing answers -------------------------------------------------------------------------------------


def info_json(info: ConnectorInfo, plugins: PluginRegistry) -> dict[str, Any]:
    return {
        "name": info.name,
        "config": mask_secrets(plugins, info.config),
        "tasks": [{"connector": task.connector, "task": task.task} for task in info.tasks],
        "type": info.type,
    }


def status_json(status: ConnectorStatus) -> dict[str, Any]:
    connector: dict[str, Any] = {"state": status.connector.state, "worker_id": status.connector.worker_id}
    if status.connector.trace:
        connector["trace"] = status.connector.trace
    tasks = []
    for task in status.tasks:
        entry: dict[str, Any] = {"id": task.id, "state": task.state, "worker_id": task.worker_id}
        if task.trace:
            entry["trace"] = task.trace
        tasks.append(entry)
    return {"name": status.name, "connector": connector, "tasks": tasks, "type": status.type}


# --- handlers --------------------------------------------------------------------------------------------


def _worker(request: web.Request) -> Worker:
    slot = request.app[WORKER_KEY]
    if slot.worker is None:
        raise web.HTTPServiceUnavailable(
            text=f"the connectors run on the master of broker group {slot.group}, and this broker is not it now: ask"
            " the master (the NameServers' routes name it)"
        )
    return slot.worker


@_answers_errors
async def list_connectors(request: web.Request) -> web.Response:
    worker = _worker(request)
    expands = request.query.getall("expand", [])
    for expand in expands:
        if expand not in EXPANDS:
            raise RequestError(f"expand={expand!r}: expected {' or '.join(EXPANDS)}")
    if not expands:
        return web.json_response(worker.connectors())
    answer: dict[str, dict[str, Any]] = {}
    for name in worker.connectors():
        entry: dict[str, Any] = {}
        if "status" in expands:
            entry["status"] = status_json(worker.status(name))
        if "info" in expands:
            entry["info"] = info_json(worker.info(name), worker.plugins)
        answer[name] = entry
    return web.json_response(answer)


@_answers_errors
async def create_connector(request: web.Request) -> web.Response:
    worker = _worker(request)
    body = await read_json(request)
    if not isinstance(body, dict):
        raise RequestError(f'expected {{"name": ..., "config": {{...}}}}, got {_json_type(body)}')
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise RequestError('the body needs "name": the connector\'s name, a non-empty string')
    if "config" not in body:
        raise RequestError('the body needs "config": an object of config keys')
    config = as_config(body["config"], '"config"')
    info = await worker.create(name, config)
    location = str(request.url.with_path(f"/connectors/{name}").with_query(None))
    return web.json_response(info_json(info, worker.plugins), status=201, headers={"Location": location})


@_answers_errors
async def get_connector(request: web.Request) -> web.Response:
    worker = _worker(request)
    return web.json_response(info_json(worker.info(request.match_info["name"]), worker.plugins))


@_answers_errors
async def put_connector(request: web.Request) -> web.Response:
    body = await read_json(request)
    if isinstance(body, dict) and isinstance(body.get("config"), dict):
        if body.get("name", request.match_info["name"]) != request.match_info["name"]:
            raise RequestError(f"the body names {body['name']!r}, the path {request.match_info['name']!r}")
        body = body["config"]
    return await _put_config(request, as_config(body))


@_answers_errors
async def put_config(request: web.Request) -> web.Response:
    return await _put_config(request, as_config(await read_json(request)))


async def _put_config(request: web.Request, config: dict[str, str]) -> web.Response:
    worker = _worker(request)
    info, created = await worker.put_config(request.match_info["name"], config)
    return web.json_response(info_json(info, worker.plugins), status=201 if created else 200)


@_answers_errors
async def delete_connector(request: web.Request) -> web.Response:
    await _worker(request).delete(request.match_info["name"])
    return web.Response(status=204)


@_answers_errors
async def get_config(request: web.Request) -> web.Response:
    worker = _worker(request)
    return web.json_response(mask_secrets(worker.plugins, worker.info(request.match_info["name"]).config))


@_answers_errors
async def get_status(request: web.Request) -> web.Response:
    return web.json_response(status_json(_worker(request).status(request.match_info["name"])))


@_answers_errors
async def get_tasks(request: web.Request) -> web.Response:
    worker = _worker(request)
    name = request.match_info["name"]
    configs = worker.task_configs(name)
    return web.json_response(
        [
            {"id": {"connector": name, "task": number}, "config": mask_secrets(worker.plugins, config)}
            for number, config in enumerate(configs)
        ]
    )


@_answers_errors
async def pause(request: web.Request) -> web.Response:
    await _worker(request).pause(request.match_info["name"])
    return web.Response(status=202)


@_answers_errors
async def resume(request: web.Request) -> web.Response:
    await _worker(request).resume(request.match_info["name"])
    return web.Response(status=202)


@_answers_errors
async def restart(request: web.Request) -> web.Response:
    worker = _worker(request)
    name = request.match_info["name"]
    include_tasks, only_failed = _flag(request, "includeTasks"), _flag(request, "onlyFailed")
    await worker.restart(name, include_tasks=include_tasks, only_failed=only_failed)
    if not (include_tasks or only_failed):
        return web.Response(status=204)  # Kafka Connect's answer to a plain restart
    return web.json_response(status_json(worker.status(name)), status=202)


@_answers_errors
async def list_plugins(request: web.Request) -> web.Response:
    infos = _worker(request).plugins.infos()
    return web.json_response(
        [{"class": info.class_path, "name": info.name, "type": info.type, "version": info.version} for info in infos]
    )


@_answers_errors
async def validate(request: web.Request) -> web.Response:
    plugins = _worker(request).plugins
    wanted = request.match_info["plugin"]
    try:
        plugin = plugins.get(wanted)
    except PluginNotFound as exc:
        raise RequestError(str(exc), 404) from None
    name = plugins.name_of(plugin)
    config = as_config(await read_json(request))
    given = config.get("connector.class")
    if given is not None:
        try:
            same = plugins.get(given) is plugin
        except PluginNotFound:
            same = False
        if not same:
            raise RequestError(f"connector.class {given!r} in the body is not the plugin {wanted!r} of the path")
    return web.json_response(validation_response(plugin, config, name))


def add_routes(app: web.Application, worker: Worker | WorkerSlot) -> None:
    """Serve the connector API of `worker` (or of the one a slot holds at each request) from `app` (before the app
    starts)."""
    app[WORKER_KEY] = worker if isinstance(worker, WorkerSlot) else WorkerSlot(worker, worker.broker.config.broker_name)
    app.router.add_routes(
        [
            web.get("/connectors", list_connectors),
            web.post("/connectors", create_connector),
            web.get("/connectors/{name}", get_connector),
            web.put("/connectors/{name}", put_connector),
            web.delete("/connectors/{name}", delete_connector),
            web.get("/connectors/{name}/config", get_config),
            web.put("/connectors/{name}/config", put_config),
            web.get("/connectors/{name}/status", get_status),
            web.get("/connectors/{name}/tasks", get_tasks),
            web.put("/connectors/{name}/pause", pause),
            web.put("/connectors/{name}/resume", resume),
            web.post("/connectors/{name}/restart", restart),
            web.get("/connector-plugins", list_plugins),
            web.put("/connector-plugins/{plugin}/config/validate", validate),
        ]
    )
