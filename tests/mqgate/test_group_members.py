"""Consumer groups' live members through a real `mqgate serve`: the readers inside it (an EventBridge rule's target, a
connector's sink task, a connected MQTT client with a shared subscription) and a gRPC SimpleConsumer are members of
the groups they read, in the admin API (which the dashboard draws) and in `mqgate admin` alike, while they read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rocketmq import FilterExpression, SimpleConsumer

from tests.proxy.serving import client_config, eventually, start
from tests.serve_process import ROOT, ServeProcess, mqtt_client

pytestmark = pytest.mark.slow

RULES = """
rules:
  - name: cold
    pattern: {type: [reading]}
    targets:
      - {id: t, type: http, url: "http://127.0.0.1:9/never"}
"""
RULE_GROUP = "connect-eb|default|cold|t"
CONNECTOR_GROUP = "connect-lines"


def http(serve: ServeProcess, path: str, method: str = "GET", body: object = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(f"{serve.http_url}{path}", data=data, method=method)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            text = response.read()
            return response.status, json.loads(text) if text.strip() else None
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def admin(serve: ServeProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("MQGATE_URL", "MQGATE_TOKEN")}
    return subprocess.run(
        [sys.executable, "-m", "mqgate.cli", "admin", "--url", serve.http_url, *args],
        cwd=ROOT,
        env={**env, "COLUMNS": "250"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def members(serve: ServeProcess) -> dict[str, int]:
    status, answer = http(serve, "/admin/groups")
    assert status == 200, answer
    return {group["group"]: group["members"] for group in answer["groups"]}


def consumers(serve: ServeProcess) -> list[dict[str, Any]]:
    status, answer = http(serve, "/admin/clients")
    assert status == 200, answer
    found: list[dict[str, Any]] = answer["consumers"]
    return found


def session_groups(serve: ServeProcess, client_id: str) -> set[str]:
    return {member["group"] for member in consumers(serve) if member["client_id"] == client_id}


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[ServeProcess]:
    data = tmp_path / "data"
    (data / "rules").mkdir(parents=True)
    (data / "rules" / "cold.yaml").write_text(RULES)
    process = start(data)
    try:
        yield process
    finally:
        assert process.stop() == 0


def test_the_readers_inside_mqgate_and_a_grpc_consumer_are_members_of_the_groups_they_read(
    serve: ServeProcess, tmp_path: Path
) -> None:
    config = {"connector.class": "file-sink", "topics": "lines", "file": str(tmp_path / "lines.txt")}
    status, answer = http(serve, "/connectors", "POST", {"name": "lines", "config": config})
    assert status == 201, answer
    watcher = mqtt_client(serve, "watcher", clean=True)
    watcher.subscribe("plant/#", qos=1)
    watcher.subscribe("$share/crew/work/#", qos=1)
    grpc = SimpleConsumer(client_config(serve), "reports", {"lines": FilterExpression()}, await_duration=1)
    grpc.startup()
    try:
        assert eventually(lambda: len(session_groups(serve, "watcher")) == 2), consumers(serve)
        counted = members(serve)
        session, shared = sorted(session_groups(serve, "watcher"))  # MQTT_SESSION_... before MQTT_SHARED...
        assert session.startswith("MQTT_SESSION_watcher") and counted[session] == 1
        assert counted[shared] == 1, counted
        assert eventually(lambda: members(serve).get(CONNECTOR_GROUP) == 1), members(serve)
        counted = members(serve)
        assert (counted[RULE_GROUP], counted["reports"]) == (1, 1), counted

        by_group = {member["group"]: member for member in consumers(serve)}
        assert by_group[CONNECTOR_GROUP]["client_id"] == "connector lines task 0"
        assert by_group[CONNECTOR_GROUP]["topics"] == ["lines"]
        assert by_group[RULE_GROUP]["client_id"] == "connector eb|default|cold|t task 0"
        readers = (CONNECTOR_GROUP, RULE_GROUP, session, shared)
        assert [by_group[group]["consume_type"] for group in readers] == ["PULL"] * len(readers)
        assert by_group["reports"]["consume_type"] == "POP" and by_group["reports"]["topics"] == ["lines"]
        assert by_group[RULE_GROUP]["seconds_since_heartbeat"] is None

        # `mqgate admin` counts the same members.
        listed = json.loads(admin(serve, "group", "list", "--json").stdout)
        assert {g["group"]: g["members"] for g in listed["groups"]}[RULE_GROUP] == 1
        progress = admin(serve, "consumer", "progress", CONNECTOR_GROUP)
        assert progress.returncode == 0, progress.stderr
        assert "live members: 1" in progress.stdout and "connector lines task 0" in progress.stdout
        # A running task would commit its positions over a reset: refused, naming it.
        reset = admin(serve, "group", "reset-offset", CONNECTOR_GROUP, "--to", "0")
        assert reset.returncode == 1 and "HTTP 409" in reset.stderr and "connector lines task 0 (PULL)" in reset.stderr
        # A pop consumer follows a reset: not refused.
        assert admin(serve, "group", "reset-offset", "reports", "--to", "0").returncode == 0
    finally:
        grpc.shutdown()
        watcher.disconnect()
        watcher.loop_stop()

    # Readers that stopped are members no more.
    assert eventually(lambda: session_groups(serve, "watcher") == set()), consumers(serve)
    assert eventually(lambda: members(serve).get("reports", 0) == 0), members(serve)
    assert http(serve, "/connectors/lines", "DELETE")[0] == 204
    assert eventually(lambda: members(serve).get(CONNECTOR_GROUP, 0) == 0), members(serve)
    assert members(serve)[RULE_GROUP] == 1
