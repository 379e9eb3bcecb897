"""`mqgate connect`: the connector REST API of a running `mqgate serve`, from the command line.

    mqgate connect list                          connectors, their plugin, state and tasks (a table)
    mqgate connect create FILE                   from a JSON or YAML file: {"name": ..., "config": {...}} or flat
    mqgate connect create --name N key=value...  from the command line
    mqgate connect status NAME                   the connector's and its tasks' states, with traces of failures
    mqgate connect pause|resume|delete NAME
    mqgate connect restart NAME [--include-tasks] [--only-failed]
    mqgate connect plugins                       the installed connector plugins

It speaks HTTP to `--url` (default http://127.0.0.1:8082, or $MQGATE_URL) with the bearer token `--token` (or
$MQGATE_TOKEN, which keeps it out of `ps`). Exit codes: 0 done, 1 the server refused (its error is shown) or
cannot be reached, 2 a bad command line or file.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from rich.table import Table

from connectors.config_file import ConfigFileError, parse_config_document
from mqgate.commands.terminal import stdout_console
from mqgate.http.config import DEFAULT_PORT

DEFAULT_URL = f"http://127.0.0.1:{DEFAULT_PORT}"
URL_ENV = "MQGATE_URL"
TOKEN_ENV = "MQGATE_TOKEN"
# A connector change can wait for tasks to stop (a sink flushing its last batch); the CLI waits as long.
REQUEST_TIMEOUT_S = 60.0

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2

EPILOG = f"""\
examples:
  mqgate connect list
  mqgate connect create examples/file-sink.yaml
  mqgate connect create examples/spark-sink.yaml path=$PWD/data/lake
  mqgate connect create --name orders-to-file connector.class=file-sink topics=orders file=/tmp/orders.txt
  mqgate connect status orders-to-file
  mqgate connect pause orders-to-file
  mqgate connect restart orders-to-file --include-tasks --only-failed
  MQGATE_TOKEN=... mqgate connect --url http://gateway:{DEFAULT_PORT} list

exit codes: 0 done, 1 the server refused the request or cannot be reached, 2 bad command line or file"""


class CliError(Exception):
    def __init__(self, message: str, code: int = EXIT_REFUSED, http_status: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.http_status = http_status  # the server's refusal, when it answered one


def add_server_options(parser: argparse.ArgumentParser) -> None:
    """--url and --token: where the REST API of `mqgate serve` is and how to get in (every REST command)."""
    parser.add_argument(
        "--url",
        default=os.environ.get(URL_ENV, DEFAULT_URL),
        help=f"the HTTP port of mqgate serve (default: ${URL_ENV} or {DEFAULT_URL})",
    )
    parser.add_argument(
        "--token",
        default=os.environ.get(TOKEN_ENV),
        help=f"bearer token, when [http] token is set (default: ${TOKEN_ENV}; the flag shows in ps)",
    )


def add_connect_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], formatter: type[argparse.HelpFormatter]
) -> None:
    connect = commands.add_parser(
        "connect",
        formatter_class=formatter,
        help="manage connectors through the REST API of a running mqgate serve",
        description="Manage the connectors of a running `mqgate serve` through its REST API.",
        epilog=EPILOG,
    )
    add_server_options(connect)
    actions = connect.add_subparsers(dest="connect_command", metavar="ACTION", title="actions")
    actions.add_parser("list", help="connectors with their plugin, state and tasks").set_defaults(connect_handler=_list)
    actions.add_parser("plugins", help="the installed connector plugins").set_defaults(connect_handler=_plugins)
    create = actions.add_parser(
        "create",
        help="create a connector from a file or key=value pairs",
        description=(
            "Create a connector. FILE is JSON or YAML holding either the REST body {name, config} or a flat\n"
            "config with its name; key=value pairs after FILE replace its keys (e.g. path=$PWD/data/lake).\n"
            "Or give --name and the whole config as key=value pairs."
        ),
        formatter_class=formatter,
    )
    create.set_defaults(connect_handler=_create)
    update = actions.add_parser(
        "update",
        help="replace a connector's config from a file or key=value pairs (created when missing)",
        description=(
            "Replace the config of a connector (PUT /connectors/NAME/config): its tasks stop and start again\n"
            "with the new config; a paused connector stays paused. Takes what create takes; creates the\n"
            "connector when it does not exist."
        ),
        formatter_class=formatter,
    )
    for parser in (create, update):
        parser.add_argument("source", nargs="?", metavar="FILE", help="JSON or YAML connector file")
        parser.add_argument("--name", help="the connector's name (with key=value pairs)")
        parser.add_argument(
            "pairs",
            nargs="*",
            metavar="KEY=VALUE",
            help="config entries, e.g. connector.class=file-sink (after FILE: they replace its keys)",
        )
    update.set_defaults(connect_handler=_update)
    for action, text in (
        ("status", "the states of the connector and its tasks"),
        ("pause", "pause the connector and its tasks"),
        ("resume", "resume a paused connector"),
        ("delete", "stop and delete the connector"),
        ("restart", "restart the connector (and its tasks with --include-tasks)"),
    ):
        sub = actions.add_parser(action, help=text)
        sub.add_argument("name", metavar="NAME")
        sub.set_defaults(connect_handler=globals()[f"_{action}"])
        if action == "restart":
            sub.add_argument("--include-tasks", action="store_true", help="restart the tasks too")
            sub.add_argument("--only-failed", action="store_true", help="only what is FAILED")
    connect.set_defaults(handler=cmd_connect, connect_parser=connect)


def cmd_connect(args: argparse.Namespace) -> int:
    if args.connect_command is None:
        args.connect_parser.print_usage(sys.stderr)
        print(f"{args.connect_parser.prog}: error: choose an action", file=sys.stderr)
        return EXIT_USAGE
    client = RestClient(args.url, args.token)
    try:
        code: int = args.connect_handler(client, args)
    except CliError as exc:
        print(f"mqgate: error: {exc}", file=sys.stderr)
        return exc.code
    return code


class RestClient:
    def __init__(self, url: str, token: str | None) -> None:
        self.url = url.rstrip("/")
        self.token = token

    def call(self, method: str, path: str, body: object = None) -> Any:
        """The answer's JSON (None for an empty answer), or CliError with the server's error message."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.url}{path}", data=data, method=method)
        if data is not None:
            request.add_header("Content-Type", "application/json")
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_S) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as exc:
            raise CliError(_http_error(method, path, exc), http_status=exc.code) from None
        except urllib.error.URLError as exc:
            reason = getattr(exc.reason, "strerror", None) or exc.reason
            raise CliError(
                f"cannot reach {self.url} ({reason}); is `mqgate serve` running with its HTTP port there? "
                f"(--url or ${URL_ENV})"
            ) from None
        except (TimeoutError, ConnectionError) as exc:
            raise CliError(f"{method} {self.url}{path}: {exc or type(exc).__name__}") from None
        return json.loads(text) if text.strip() else None


def _http_error(method: str, path: str, exc: urllib.error.HTTPError) -> str:
    text = exc.read().decode(errors="replace")
    try:
        body = json.loads(text)
        message = str(body["message"])
    except (ValueError, KeyError, TypeError):
        body, message = None, text.strip() or exc.reason
    lines = [f"{method} {path}: HTTP {exc.code}: {message}"]
    if isinstance(body, dict):
        for error in body.get("errors") or []:
            lines.append(f"  {error.get('key')}: {error.get('message')}")
    if exc.code == 401:
        lines.append(f"  (give the token with --token or ${TOKEN_ENV})")
    return "\n".join(lines)


def _quote(name: str) -> str:
    return urllib.parse.quote(name, safe="")


# --- actions ---------------------------------------------------------------------------------------------


def _list(client: RestClient, args: argparse.Namespace) -> int:
    connectors = client.call("GET", "/connectors?expand=status&expand=info")
    table = Table(title=f"connectors at {client.url}", title_justify="left")
    for column in ("name", "type", "plugin", "state", "tasks", "topics"):
        table.add_column(column)
    for name, entry in sorted(connectors.items()):
        config = entry["info"]["config"]
        status = entry["status"]
        states = [task["state"] for task in status["tasks"]]
        running = sum(state == "RUNNING" for state in states)
        tasks = f"{running}/{len(states)} running" + (
            f", {states.count('FAILED')} failed" if "FAILED" in states else ""
        )
        topics = config.get("topics") or config.get("topic") or ""
        table.add_row(
            name, status["type"], config.get("connector.class", ""), status["connector"]["state"], tasks, topics
        )
    stdout_console().print(table)
    return EXIT_OK


def _plugins(client: RestClient, args: argparse.Namespace) -> int:
    table = Table(title=f"connector plugins at {client.url}", title_justify="left")
    for column in ("name", "type", "version", "class"):
        table.add_column(column)
    for plugin in client.call("GET", "/connector-plugins"):
        table.add_row(plugin["name"], plugin["type"], plugin["version"], plugin["class"])
    stdout_console().print(table)
    return EXIT_OK


def _status(client: RestClient, args: argparse.Namespace) -> int:
    status = client.call("GET", f"/connectors/{_quote(args.name)}/status")
    table = Table(title=f"connector {status['name']} ({status['type']})", title_justify="left")
    for column in ("part", "state", "worker"):
        table.add_column(column)
    table.add_row("connector", status["connector"]["state"], status["connector"]["worker_id"])
    for task in status["tasks"]:
        table.add_row(f"task {task['id']}", task["state"], task["worker_id"])
    console = stdout_console()
    console.print(table)
    for part, trace in [("connector", status["connector"].get("trace"))] + [
        (f"task {task['id']}", task.get("trace")) for task in status["tasks"]
    ]:
        if trace:
            console.print(f"[bold]{part} trace:[/bold]", markup=True)
            console.print(trace, markup=False, highlight=False)
    return EXIT_OK


def _simple(client: RestClient, method: str, path: str, done: str) -> int:
    client.call(method, path)
    print(done)
    return EXIT_OK


def _pause(client: RestClient, args: argparse.Namespace) -> int:
    return _simple(client, "PUT", f"/connectors/{_quote(args.name)}/pause", f"connector {args.name!r} paused")


def _resume(client: RestClient, args: argparse.Namespace) -> int:
    return _simple(client, "PUT", f"/connectors/{_quote(args.name)}/resume", f"connector {args.name!r} resumed")


def _delete(client: RestClient, args: argparse.Namespace) -> int:
    return _simple(client, "DELETE", f"/connectors/{_quote(args.name)}", f"connector {args.name!r} deleted")


def _restart(client: RestClient, args: argparse.Namespace) -> int:
    query = urllib.parse.urlencode(
        {"includeTasks": str(args.include_tasks).lower(), "onlyFailed": str(args.only_failed).lower()}
    )
    what = "and its tasks " if args.include_tasks else ""
    return _simple(
        client, "POST", f"/connectors/{_quote(args.name)}/restart?{query}", f"connector {args.name!r} {what}restarted"
    )


def _create(client: RestClient, args: argparse.Namespace) -> int:
    name, config = _create_body(args)
    try:
        info = client.call("POST", "/connectors", {"name": name, "config": config})
    except CliError as exc:
        if exc.http_status != HTTP_CONFLICT:
            raise
        given = " ".join(shlex.quote(arg) for arg in [*([args.source] if args.source else []), *args.pairs])
        named = f"--name {shlex.quote(name)} " if args.name is not None else ""
        raise CliError(
            f"connector {name!r} already exists; `mqgate connect update {named}{given}` replaces its config,"
            f" `mqgate connect delete {shlex.quote(name)}` removes it"
        ) from None
    tasks = len(info.get("tasks", []))
    print(f"connector {info['name']!r} created ({info['config'].get('connector.class')}, {tasks} task(s))")
    return EXIT_OK


HTTP_CONFLICT = 409


def _update(client: RestClient, args: argparse.Namespace) -> int:
    name, config = _create_body(args)
    info = client.call("PUT", f"/connectors/{_quote(name)}/config", config)
    tasks = len(info.get("tasks", []))
    print(f"connector {info['name']!r} updated ({info['config'].get('connector.class')}, {tasks} task(s))")
    return EXIT_OK


def _create_body(args: argparse.Namespace) -> tuple[str, dict[str, object]]:
    pairs = list(args.pairs)
    source = args.source
    if source is not None and args.name is not None:
        pairs.insert(0, source)  # `create --name n a=b`: argparse put the first pair in FILE's place
        source = None
    config: dict[str, object] = {}
    if source is not None:
        name, config = _read_file(Path(source))
    elif args.name is None:
        raise CliError("create needs FILE, or --name NAME with key=value pairs", EXIT_USAGE)
    else:
        name = args.name
    for pair in pairs:  # after FILE: they replace its keys (a path only this machine knows, a secret)
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise CliError(f"{pair!r}: expected key=value, e.g. connector.class=file-sink", EXIT_USAGE)
        config[key.strip()] = value
    return name, config


def _read_file(path: Path) -> tuple[str, dict[str, object]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror or exc}", EXIT_USAGE) from None
    try:
        data = parse_config_document(path, text)
    except ConfigFileError as exc:
        raise CliError(str(exc), EXIT_USAGE) from None
    if not isinstance(data, dict):
        raise CliError(f"{path}: expected an object: {{name, config}} or a flat config with name", EXIT_USAGE)
    if isinstance(data.get("config"), dict):
        name, config = data.get("name"), dict(data["config"])
    else:
        config = dict(data)
        name = config.get("name")
    name = name if name is not None else path.stem
    if not isinstance(name, str):
        raise CliError(f"{path}: name: expected a string", EXIT_USAGE)
    # YAML reads `tasks.max: 2` as a number and `enabled: yes` as a boolean; the API takes both as strings.
    return name, config
