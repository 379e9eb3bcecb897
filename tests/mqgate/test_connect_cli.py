"""`mqgate connect`, run as a real process against a real `mqgate serve` (with a bearer token): a file source ->
topic -> file sink pipeline built, paused, resumed, restarted and deleted from the command line, and the errors."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.serve_process import ROOT, ServeProcess

TOKEN = "cli-token"
WAIT_S = 30.0


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    directory = tmp_path_factory.mktemp("connect-cli")
    config = directory / "mqgate.toml"
    config.write_text(f'[http]\ntoken = "{TOKEN}"\n')
    started = ServeProcess(directory / "data", "--config", config)
    yield started
    assert started.stop() == 0


def connect(
    server: ServeProcess | str, *args: str | Path, token: str | None = TOKEN
) -> subprocess.CompletedProcess[str]:
    url = server if isinstance(server, str) else server.http_url
    env = {key: value for key, value in os.environ.items() if key not in ("MQGATE_TOKEN", "MQGATE_URL")}
    if token is not None:
        env["MQGATE_TOKEN"] = token
    env["COLUMNS"] = "200"  # rich tables: wide enough that no cell is cut
    return subprocess.run(
        [sys.executable, "-m", "mqgate.cli", "connect", "--url", url, *map(str, args)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def row(table: str, name: str) -> list[str]:
    """The cells of the table row starting with `name`."""
    for line in table.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("│┃").split("│")]
        if cells and cells[0] == name:
            return cells
    raise AssertionError(f"no row {name!r} in\n{table}")


def test_a_pipeline_from_the_command_line(server: ServeProcess, tmp_path: Path):
    source_in, sink_out = tmp_path / "in.txt", tmp_path / "out.txt"
    source_in.write_text("".join(f"line {number}\n" for number in range(10)))
    source_file = tmp_path / "lines-in.yaml"
    source_file.write_text(
        f"name: lines-in\nconnector.class: file-source\nfile: {source_in}\ntopic: cli-lines\ntasks.max: 1\n"
    )
    assert ok(connect(server, "create", source_file)) == "connector 'lines-in' created (file-source, 1 task(s))\n"
    sink_file = tmp_path / "sink.json"
    sink_file.write_text(
        json.dumps(
            {
                "name": "lines-out",
                "config": {"connector.class": "file-sink", "topics": "cli-lines", "file": str(sink_out)},
            }
        )
    )
    assert "connector 'lines-out' created (file-sink, 1 task(s))" in ok(connect(server, "create", sink_file))
    wait_for(lambda: len(lines(sink_out)) == 10, "10 lines through the pipeline")
    assert lines(sink_out) == [f"line {number}" for number in range(10)]  # one file, one partition: in order

    table = ok(connect(server, "list"))
    assert row(table, "lines-in")[1:] == ["source", "file-source", "RUNNING", "1/1 running", "cli-lines"]
    assert row(table, "lines-out")[1:] == ["sink", "file-sink", "RUNNING", "1/1 running", "cli-lines"]
    status = ok(connect(server, "status", "lines-out"))
    assert "connector lines-out (sink)" in status
    assert row(status, "connector")[1:] == ["RUNNING", "mqgate"]
    assert row(status, "task 0")[1:] == ["RUNNING", "mqgate"]

    assert ok(connect(server, "pause", "lines-out")) == "connector 'lines-out' paused\n"
    assert row(ok(connect(server, "status", "lines-out")), "task 0")[1] == "PAUSED"
    with source_in.open("a") as file:
        file.write("".join(f"line {number}\n" for number in range(10, 15)))
    time.sleep(1.5)
    assert len(lines(sink_out)) == 10  # paused: nothing written
    assert row(ok(connect(server, "list")), "lines-out")[3] == "PAUSED"
    assert ok(connect(server, "resume", "lines-out")) == "connector 'lines-out' resumed\n"
    wait_for(lambda: len(lines(sink_out)) == 15, "the 5 lines appended while paused")
    assert lines(sink_out) == [f"line {number}" for number in range(15)]

    restarted = ok(connect(server, "restart", "lines-out", "--include-tasks"))
    assert restarted == "connector 'lines-out' and its tasks restarted\n"
    assert ok(connect(server, "delete", "lines-in")) == "connector 'lines-in' deleted\n"
    assert ok(connect(server, "delete", "lines-out")) == "connector 'lines-out' deleted\n"
    result = connect(server, "status", "lines-out")
    assert result.returncode == 1
    assert result.stderr.startswith("mqgate: error: GET /connectors/lines-out/status: HTTP 404: connector 'lines-out'")


def test_create_from_key_value_pairs(server: ServeProcess, tmp_path: Path):
    out = tmp_path / "kv.txt"
    result = connect(
        server, "create", "--name", "kv", "connector.class=file-sink", "topics=kv-topic", f"file={out}", "tasks.max=1"
    )
    assert ok(result) == "connector 'kv' created (file-sink, 1 task(s))\n"
    assert row(ok(connect(server, "list")), "kv")[2] == "file-sink"
    ok(connect(server, "delete", "kv"))


def test_pairs_after_a_file_replace_its_keys(server: ServeProcess, tmp_path: Path):
    out = tmp_path / "override.txt"
    result = connect(server, "create", "examples/file-sink.yaml", f"file={out}", "tasks.max=1")
    assert ok(result) == "connector 'sensors-to-file' created (file-sink, 1 task(s))\n"
    request = urllib.request.Request(
        f"{server.http_url}/connectors/sensors-to-file/config", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        config = json.load(response)
    assert (config["file"], config["topics"], config["tasks.max"]) == (str(out), "sensors", "1")
    ok(connect(server, "delete", "sensors-to-file"))


def test_plugins(server: ServeProcess):
    table = ok(connect(server, "plugins"))
    assert row(table, "file-sink")[1:] == ["sink", row(table, "file-sink")[2], "connectors.file_sink.FileSinkConnector"]
    assert row(table, "file-source")[1] == "source"


def test_an_invalid_config_shows_each_key(server: ServeProcess):
    result = connect(server, "create", "--name", "bad", "connector.class=file-sink", "tasks.max=0")
    assert result.returncode == 1
    assert result.stdout == ""
    message, *details = result.stderr.strip().splitlines()
    assert message.startswith("mqgate: error: POST /connectors: HTTP 400: connector 'bad': invalid config: ")
    assert sorted(details) == [
        "  file: missing required configuration",
        "  tasks.max: invalid value '0': must be at least 1",
        "  topics: missing required configuration",
    ]


def test_a_duplicate_is_refused_with_the_servers_message(server: ServeProcess, tmp_path: Path):
    args = ("create", "--name", "twice", "connector.class=file-sink", "topics=t2", f"file={tmp_path / 'x'}")
    ok(connect(server, *args))
    result = connect(server, *args)
    assert result.returncode == 1
    # The way on is a command of this CLI, not a REST route.
    assert result.stderr.strip() == (
        "mqgate: error: connector 'twice' already exists; `mqgate connect update --name twice"
        f" connector.class=file-sink topics=t2 file={tmp_path / 'x'}` replaces its config,"
        " `mqgate connect delete twice` removes it"
    )
    # ... and that command does it.
    ok(connect(server, "update", "--name", "twice", "connector.class=file-sink", "topics=t3", f"file={tmp_path / 'x'}"))
    assert _config(server, "twice")["topics"] == "t3"
    ok(connect(server, "delete", "twice"))


def _config(server: ServeProcess, name: str) -> dict[str, str]:
    request = urllib.request.Request(f"{server.http_url}/connectors/{name}/config")
    request.add_header("Authorization", f"Bearer {TOKEN}")
    with urllib.request.urlopen(request, timeout=30) as response:
        config: dict[str, str] = json.loads(response.read())
    return config


def test_a_file_that_exists_is_refused_naming_update_with_the_file(server: ServeProcess, tmp_path: Path):
    source = tmp_path / "sink.yaml"
    source.write_text(f"name: from-file\nconnector.class: file-sink\ntopics: t4\nfile: {tmp_path / 'y'}\n")
    ok(connect(server, "create", source))
    result = connect(server, "create", source)
    assert result.returncode == 1 and f"`mqgate connect update {source}` replaces its config" in result.stderr
    source.write_text(source.read_text().replace("topics: t4", "topics: t5"))
    assert "connector 'from-file' updated" in ok(connect(server, "update", source))
    assert _config(server, "from-file")["topics"] == "t5"
    ok(connect(server, "delete", "from-file"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("create",), "create needs FILE, or --name NAME with key=value pairs"),
        (("create", "--name", "n", "novalue"), "'novalue': expected key=value"),
        (("create", "/no/such/file.yaml"), "/no/such/file.yaml: cannot read: No such file or directory"),
        ((), "choose an action"),
    ],
)
def test_bad_command_lines_exit_2(server: ServeProcess, args: tuple[str, ...], message: str):
    result = connect(server, *args)
    assert result.returncode == 2
    assert message in result.stderr


def test_a_bad_file_exits_2_naming_it(server: ServeProcess, tmp_path: Path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"name": "x",')
    result = connect(server, "create", bad)
    assert result.returncode == 2
    assert f"{bad}:1:14: invalid JSON: Expecting property name enclosed in double quotes" in result.stderr
    yaml_file = tmp_path / "bad.yaml"
    yaml_file.write_text("name: x\nconnector.class: file-sink\n  topics: [t\n")
    result = connect(server, "create", yaml_file)
    assert result.returncode == 2
    # The file's name (not "<unicode string>"), and the line with the caret under the place, as YAML shows it.
    assert result.stderr.splitlines() == [
        f"mqgate: error: {yaml_file}:3:9: invalid YAML: mapping values are not allowed here",
        "      topics: [t",
        "            ^",
    ]
    listed = tmp_path / "list.yaml"
    listed.write_text("- a\n- b\n")
    result = connect(server, "create", listed)
    assert (result.returncode, "expected an object" in result.stderr) == (2, True)


def test_without_the_token_the_server_refuses(server: ServeProcess):
    result = connect(server, "list", token=None)
    assert result.returncode == 1
    assert "HTTP 401: authentication required" in result.stderr
    assert "--token or $MQGATE_TOKEN" in result.stderr
    result = subprocess.run(
        [sys.executable, "-m", "mqgate.cli", "connect", "--url", server.http_url, "--token", TOKEN, "list"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr


def test_connection_refused_names_the_url():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{probe.getsockname()[1]}"  # bound, not listening: refused
        result = connect(url, "list")
    assert result.returncode == 1
    assert result.stderr.startswith(f"mqgate: error: cannot reach {url} (Connection refused)")
    assert "--url" in result.stderr
