"""Archives through the HTTP API of a real `mqgate serve`: created, described with their counts, changed, refused,
replayed from by event time to a real CloudEvents receiver, and deleted with their files; an operator's archive
stays the operator's."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.eventbridge.target_server import TargetServer
from tests.eventbridge.test_rest_definitions import call
from tests.serve_process import ServeProcess

OPERATOR_FILE = "archives:\n  - {name: from-file, bus: elsewhere}\n"


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[ServeProcess]:
    rules = tmp_path / "data" / "rules"
    rules.mkdir(parents=True)
    (rules / "operator.yaml").write_text(OPERATOR_FILE)
    process = ServeProcess(tmp_path / "data")
    yield process
    assert process.stop() == 0


def order(n: int, kind: str = "order") -> dict[str, Any]:
    time = f"2020-01-{n:02d}T00:00:00Z"
    return {"specversion": "1.0", "id": f"o{n}", "source": "shop", "type": kind, "time": time, "data": {"n": n}}


async def test_archive_life_cycle_and_a_replay_from_it(serve: ServeProcess, target: TargetServer) -> None:
    base = f"{serve.http_url}/archives/orders"
    async with aiohttp.ClientSession() as http:
        rule = {"pattern": {"type": ["order"]}, "targets": [{"id": "a", "type": "http", "url": target.url}]}
        status, _ = await call(http, "PUT", f"{serve.http_url}/rules/default/orders", rule)
        assert status == 201
        definition = {"pattern": {"type": ["order"]}, "retention_days": 30, "description": "every order"}
        status, created = await call(http, "PUT", base, definition)
        assert status == 201, created
        assert (created["state"], created["event_count"], created["retention_days"]) == ("ENABLED", 0, 30)
        assert "api-archive@orders.yaml" in created["file"] and created["oldest_event_time"] is None

        events = [order(1), order(2, "refund"), order(3), order(4)]
        url = f"{serve.http_url}/buses/default/events"
        status, answer = await call(http, "POST", url, events, "application/cloudevents-batch+json")
        assert status == 200 and answer["FailedEntryCount"] == 0
        await target.wait_for(3)
        for _ in range(200):
            status, described = await call(http, "GET", base)
            if described["event_count"] == 3:
                break
            await asyncio.sleep(0.05)
        assert described["event_count"] == 3 and described["size_bytes"] > 0 and described["segments"] == 1
        assert (described["oldest_event_time"], described["newest_event_time"]) == (
            "2020-01-01T00:00:00.000Z",
            "2020-01-04T00:00:00.000Z",
        )

        replay = {"from": "2020-01-02T00:00:00Z", "to": "2020-01-03T12:00:00Z", "archive": "orders", "name": "jan"}
        status, summary = await call(http, "POST", f"{serve.http_url}/buses/default/replays", replay)
        assert status == 200, summary
        assert (summary["archive"], summary["replayed"], summary["queues"]) == ("orders", 1, [])
        await target.wait_for(4)
        copies = [r for r in target.received if r.attributes.get("replayname") == "jan"]
        assert [r.attributes["id"] for r in copies] == ["o3"]  # o2 is a refund: never archived

        status, refused = await call(http, "PUT", f"{serve.http_url}/archives/bad", {"retention_days": -1})
        assert status == 400 and "retention_days is -1" in refused["message"]
        status, refused = await call(http, "PUT", base, {**definition, "bus": "other"})
        assert status == 409 and "an archive keeps its bus" in refused["message"]
        status, changed = await call(http, "PUT", base, {**definition, "retention_days": 7})
        assert status == 200 and changed["retention_days"] == 7 and changed["event_count"] == 3
        status, listed = await call(http, "GET", f"{serve.http_url}/archives")
        assert [(a["name"], a["bus"]) for a in listed] == [("from-file", "elsewhere"), ("orders", "default")]

        status, refused = await call(
            http, "POST", f"{serve.http_url}/buses/default/replays", {**replay, "archive": "from-file"}
        )
        assert status == 400 and "holds events of bus 'elsewhere'" in refused["message"]
        status, refused = await call(http, "DELETE", f"{serve.http_url}/archives/from-file")
        assert status == 409 and "operator.yaml" in refused["message"]
        status, refused = await call(http, "DELETE", f"{serve.http_url}/buses/elsewhere")
        assert status == 409 and "has archives (from-file)" in refused["message"]

        files = serve.data_dir / "eventbridge" / "archives" / "orders"
        assert any(files.iterdir())
        status, _ = await call(http, "DELETE", base)
        assert status == 204 and not files.exists()
        status, _ = await call(http, "GET", base)
        assert status == 404
        status, refused = await call(http, "POST", f"{serve.http_url}/buses/default/replays", replay)
        assert status == 404 and "no archive 'orders'" in refused["message"]
