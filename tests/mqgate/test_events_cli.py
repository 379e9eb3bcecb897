"""`mqgate events`, run as a real process against a real `mqgate serve` (with a bearer token) whose rules deliver to
real aiohttp targets: replay, dead-letter listing and redrive from the command line, and the errors."""

from __future__ import annotations

import asyncio
import datetime
import json
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import aiohttp
import pytest

from tests.eventbridge.target_server import TargetServer
from tests.serve_process import ROOT, ServeProcess

TOKEN = "events-token"
WAIT_S = 20.0
QUIET_S = 0.5
# Between two PutEvents, so that store times (milliseconds) and the test's clock readings cannot touch.
GAP_S = 0.05

RULES = """
rules:
  - name: fan
    pattern: {{source: [cli-test]}}
    targets:
      - id: ok
        type: http
        url: {ok}
      - id: broken
        type: http
        url: {broken}
  - name: other
    pattern: {{source: [cli-test]}}
    targets:
      - id: t
        type: http
        url: {other}
  - name: orders
    pattern: {{type: [order]}}
    targets:
      - id: t
        type: http
        url: {orders}
"""


class Targets:
    def __init__(self, ok: TargetServer, broken: TargetServer, other: TargetServer, orders: TargetServer) -> None:
        self.ok, self.broken, self.other, self.orders = ok, broken, other, orders


@pytest.fixture
async def targets() -> AsyncIterator[Targets]:
    servers = [await TargetServer(status=status).start() for status in (200, 400, 200, 200)]
    yield Targets(*servers)
    for server in servers:
        await server.stop()


@pytest.fixture
def serve(tmp_path: Path, targets: Targets) -> Iterator[ServeProcess]:
    rules = tmp_path / "data" / "rules"
    rules.mkdir(parents=True)
    (rules / "r.yaml").write_text(
        RULES.format(ok=targets.ok.url, broken=targets.broken.url, other=targets.other.url, orders=targets.orders.url)
    )
    config = tmp_path / "mqgate.toml"
    config.write_text(f'[http]\ntoken = "{TOKEN}"\n')
    process = ServeProcess(tmp_path / "data", "--config", config)
    yield process
    assert process.stop() == 0


async def events_cli(serve: ServeProcess, *args: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("MQGATE_TOKEN", "MQGATE_URL")}
    env["MQGATE_TOKEN"] = TOKEN
    env["COLUMNS"] = "250"  # rich tables: wide enough that no cell is cut
    command = [sys.executable, "-m", "mqgate.cli", "events", "--url", serve.http_url, *args]
    return await asyncio.to_thread(
        subprocess.run, command, cwd=ROOT, capture_output=True, text=True, timeout=60, env=env
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


async def put(serve: ServeProcess, *ids: str, kind: str = "t") -> None:
    batch = [{"specversion": "1.0", "id": i, "source": "cli-test", "type": kind, "data": {"id": i}} for i in ids]
    headers = {"Content-Type": "application/cloudevents-batch+json", "Authorization": f"Bearer {TOKEN}"}
    url = f"{serve.http_url}/buses/default/events"
    async with aiohttp.ClientSession() as http, http.post(url, data=json.dumps(batch), headers=headers) as r:
        assert r.status == 200 and (await r.json())["FailedEntryCount"] == 0


def cells(row: str) -> list[str]:
    """The cells of a rich table row."""
    return [cell.strip() for cell in row.strip().strip("│").split("│")]


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def dead_letters(serve: ServeProcess, count: int) -> None:
    """Wait until the default dead-letter topic holds `count` events."""
    url = f"{serve.http_url}/dead-letters/%25EVENTBUS-DLQ%25default"
    async with asyncio.timeout(WAIT_S), aiohttp.ClientSession() as http:
        while True:
            async with http.get(url, headers={"Authorization": f"Bearer {TOKEN}"}) as response:
                if response.status == 200 and (await response.json())["total"] >= count:
                    return
            await asyncio.sleep(0.05)


async def test_replay_of_a_time_range_to_one_rule(serve: ServeProcess, targets: Targets) -> None:
    await put(serve, "e1")
    await targets.other.wait_for(1)
    await asyncio.sleep(GAP_S)
    start = now_ms()
    await put(serve, "e2", "e3")
    end = now_ms()
    await asyncio.sleep(GAP_S)
    await put(serve, "e4")
    await targets.other.wait_for(4)
    await targets.ok.wait_for(4)
    iso_start = datetime.datetime.fromtimestamp(start / 1000, datetime.UTC).isoformat(timespec="milliseconds")
    out = ok(
        await events_cli(
            serve, "replay", "--bus", "default", "--from", iso_start, "--to", str(end), "--rule", "other",
            "--name", "cli-replay",
        )
    )  # fmt: skip
    assert "replay cli-replay: 2 events of bus 'default'" in out
    assert "to rule 'other'" in out
    await targets.other.wait_for(6)
    await asyncio.sleep(QUIET_S)
    copies = [(r.attributes["id"], r.attributes.get("replayname")) for r in targets.other.received[4:]]
    assert sorted(copies) == [("e2", "cli-replay"), ("e3", "cli-replay")]
    assert len(targets.ok.received) == 4  # rule fan: no copies


async def test_a_replay_to_one_rule_sends_it_only_what_its_pattern_matches(
    serve: ServeProcess, targets: Targets
) -> None:
    # The case: rule `orders` (type: [order]) was sent the bus's readings by a replay restricted to it.
    await put(serve, "s1", "s2", kind="sensor.reading")
    await put(serve, "o1", kind="order")
    await targets.other.wait_for(3)
    await targets.orders.wait_for(1)
    out = ok(
        await events_cli(serve, "replay", "--bus", "default", "--from", "0", "--to", str(now_ms() + 1000),
                         "--rule", "orders", "--name", "orders-only")
    )  # fmt: skip
    assert "replay orders-only: 1 events of bus 'default'" in out
    assert "to rule 'orders' (0 replayed copies skipped; 2 not matched by its pattern)" in out
    await targets.orders.wait_for(2)
    await asyncio.sleep(QUIET_S)
    assert sorted((r.attributes["id"], r.attributes.get("replayname", "")) for r in targets.orders.received) == [
        ("o1", ""),
        ("o1", "orders-only"),
    ]
    assert len(targets.other.received) == 3  # the other rules: no copies


async def test_dlq_list_shows_the_failed_target_status_and_error(serve: ServeProcess, targets: Targets) -> None:
    await put(serve, "d1", "d2")
    await dead_letters(serve, 2)
    out = ok(await events_cli(serve, "dlq", "list", "--bus", "default"))
    assert "dead letters in %EVENTBUS-DLQ%default: 1-2 of 2" in out
    rows = [cells(line) for line in out.splitlines() if "broken" in line]
    # In the order they failed: the two events' deliveries run concurrently (and a bus's queues are not ordered
    # with each other), so either may be first.
    assert sorted(row[1] for row in rows) == ["d1", "d2"]
    for found in rows:
        assert found[2:8] == ["t", "default", "fan", "broken", "400", "1"]
        assert found[9] == "no"  # not redriven
        assert "400" in found[10]
    first, second = rows[0][1], rows[1][1]
    paged = ok(await events_cli(serve, "dlq", "list", "--topic", "%EVENTBUS-DLQ%default", "--limit", "1"))
    assert "1-1 of 2" in paged and first in paged and second not in paged


async def test_dlq_redrive_reaches_the_fixed_target_once(serve: ServeProcess, targets: Targets) -> None:
    await put(serve, "r1", "r2")
    await dead_letters(serve, 2)
    await targets.ok.wait_for(2)
    await targets.other.wait_for(2)
    targets.broken.status = 200
    out = ok(await events_cli(serve, "dlq", "redrive", "--bus", "default", "--rule", "fan", "--target", "broken"))
    assert "redrive of %EVENTBUS-DLQ%default: 2 events sent again" in out
    await targets.broken.wait_for(2)
    again = ok(await events_cli(serve, "dlq", "redrive", "--bus", "default"))
    assert "2 events" not in again and ": 0 events sent again" in again
    await asyncio.sleep(QUIET_S)
    assert sorted(targets.broken.ids()) == ["r1", "r2"]
    assert len(targets.ok.received) == 2 and len(targets.other.received) == 2
    listed = ok(await events_cli(serve, "dlq", "list"))
    assert [cells(line)[9] for line in listed.splitlines() if "broken" in line] == ["yes", "yes"], listed


async def test_unknown_bus_or_rule_is_an_error_naming_it(serve: ServeProcess) -> None:
    replay = await events_cli(serve, "replay", "--bus", "nope", "--from", "0", "--to", "2024-01-01T00:00:00Z")
    assert replay.returncode == 1
    assert "bus 'nope' does not exist" in replay.stderr
    redrive = await events_cli(serve, "dlq", "redrive", "--rule", "gone")
    assert redrive.returncode == 1
    assert "no rule 'gone' on bus 'default'" in redrive.stderr
    bad_time = await events_cli(serve, "replay", "--bus", "default", "--from", "soon", "--to", "0")
    assert bad_time.returncode == 2 and "'--from'" in bad_time.stderr


async def test_the_rest_api_refuses_bad_requests_saying_what_to_do(serve: ServeProcess) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    base = serve.http_url
    async with aiohttp.ClientSession(headers=auth) as http:
        async with http.post(f"{base}/buses/default/replays", json={"from": 0}) as response:
            assert response.status == 400
            assert "missing: to" in (await response.json())["message"]
        async with http.post(f"{base}/buses/default/replays", json={"from": 5, "to": 1}) as response:
            assert response.status == 400 and "is after 'to'" in (await response.json())["message"]
        async with http.get(f"{base}/dead-letters/orders") as response:
            assert response.status == 404 and "not a dead-letter topic" in (await response.json())["message"]
        async with http.get(f"{base}/dead-letters/%25EVENTBUS-DLQ%25default?limit=many") as response:
            assert response.status == 400 and "limit='many'" in (await response.json())["message"]
        async with http.post(f"{base}/dead-letters/%25EVENTBUS-DLQ%25default/redrive", json={"target": "t"}) as r:
            assert r.status == 400 and "give its 'rule' too" in (await r.json())["message"]


async def test_replay_from_an_archive_by_event_time(serve: ServeProcess, targets: Targets) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        async with http.put(f"{serve.http_url}/archives/kept", json={"pattern": {"source": ["cli-test"]}}) as r:
            assert r.status == 201, await r.text()
        batch = [
            {"specversion": "1.0", "id": f"j{n}", "source": "cli-test", "type": "t", "time": f"2020-01-0{n}T00:00:00Z"}
            for n in range(1, 5)
        ]
        url = f"{serve.http_url}/buses/default/events"
        async with http.post(url, json=batch, headers={"Content-Type": "application/cloudevents-batch+json"}) as r:
            assert r.status == 200
        async with asyncio.timeout(WAIT_S):
            while True:
                async with http.get(f"{serve.http_url}/archives/kept") as r:
                    if (await r.json())["event_count"] == 4:
                        break
                await asyncio.sleep(0.05)
    await targets.other.wait_for(4)
    out = ok(
        await events_cli(
            serve, "replay", "--bus", "default", "--archive", "kept", "--from", "2020-01-02", "--to",
            "2020-01-03T00:00:00Z", "--rule", "other", "--name", "from-kept",
        )
    )  # fmt: skip
    assert "replay from-kept: 2 events of archive 'kept' with event times from 2020-01-02T00:00:00.000Z" in out
    await targets.other.wait_for(6)
    copies = sorted((r.attributes["id"], r.attributes.get("replayname")) for r in targets.other.received[4:])
    assert copies == [("j2", "from-kept"), ("j3", "from-kept")]
    refused = await events_cli(serve, "replay", "--bus", "default", "--archive", "nope", "--from", "0", "--to", "1")
    assert refused.returncode == 1 and "no archive 'nope'" in refused.stderr
