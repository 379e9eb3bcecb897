"""Rules, targets and sources created, changed, disabled and deleted through the HTTP API of a real `mqgate serve`,
with events flowing to a real CloudEvents receiver; an operator's file stays the operator's; scheduled rules with
their next fire time."""

from __future__ import annotations

import asyncio
import datetime
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.eventbridge.target_server import TargetServer
from tests.serve_process import ServeProcess

OPERATOR_FILE = """
rules:
  - name: from-file
    pattern: {type: [never]}
    targets:
      - {id: t, type: http, url: "http://127.0.0.1:9/x"}
"""


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[ServeProcess]:
    rules = tmp_path / "data" / "rules"
    rules.mkdir(parents=True)
    (rules / "operator.yaml").write_text(OPERATOR_FILE)
    process = ServeProcess(tmp_path / "data")
    yield process
    assert process.stop() == 0


async def call(
    http: aiohttp.ClientSession, method: str, url: str, body: Any = None, content_type: str | None = None
) -> tuple[int, Any]:
    headers = {"Content-Type": content_type} if content_type else None
    async with http.request(method, url, json=body, headers=headers) as response:
        text = await response.text()
        return response.status, (await response.json() if text else None)


async def put_event(http: aiohttp.ClientSession, serve: ServeProcess, event_id: str, kind: str = "order") -> None:
    event = {"specversion": "1.0", "id": event_id, "source": "shop", "type": kind, "data": {"n": 1}}
    url = f"{serve.http_url}/buses/default/events"
    status, answer = await call(http, "POST", url, [event], "application/cloudevents-batch+json")
    assert status == 200 and answer["FailedEntryCount"] == 0, answer


async def test_rule_life_cycle_through_the_api(serve: ServeProcess, target: TargetServer) -> None:
    base = f"{serve.http_url}/rules/default/orders"
    rule = {"pattern": {"type": ["order"]}, "targets": [{"id": "a", "type": "http", "url": target.url}]}
    async with aiohttp.ClientSession() as http:
        status, created = await call(http, "PUT", base, rule)
        assert status == 201, created
        assert created["name"] == "orders" and created["targets"][0]["state"] == "RUNNING"
        assert "api-rule@default@orders.yaml" in created["file"]
        await put_event(http, serve, "o1")
        await target.wait_for(1)

        status, disabled = await call(http, "PUT", f"{base}/disable")
        assert status == 200 and disabled["enabled"] is False and disabled["targets"][0]["state"] == "DISABLED"
        await put_event(http, serve, "o2")
        status, _ = await call(http, "PUT", f"{base}/enable")
        assert status == 200
        await put_event(http, serve, "o3")
        await target.wait_for(2)
        await asyncio.sleep(0.3)
        assert target.ids() == ["o1", "o3"]  # o2 came while the rule was disabled

        status, replaced = await call(http, "PUT", base, {**rule, "pattern": {"type": ["refund"]}})
        assert status == 200 and replaced["pattern"] == {"type": ["refund"]}
        status, with_target = await call(http, "PUT", f"{base}/targets/b", {"type": "http", "url": target.url})
        assert status == 201 and [t["id"] for t in with_target["targets"]] == ["a", "b"]
        await put_event(http, serve, "r1", "refund")
        await target.wait_for(4)
        assert target.ids()[2:] == ["r1", "r1"]  # both targets
        status, _ = await call(http, "DELETE", f"{base}/targets/b")
        assert status == 204
        status, answer = await call(http, "DELETE", f"{base}/targets/a")
        assert status == 409 and "at least one target" in answer["message"]

        status, _ = await call(http, "DELETE", base)
        assert status == 204
        status, _ = await call(http, "GET", base)
        assert status == 404
    assert not (serve.data_dir / "rules" / "api-rule@default@orders.yaml").exists()


async def test_bad_definitions_are_refused_with_the_reason(serve: ServeProcess) -> None:
    base = f"{serve.http_url}/rules/default"
    async with aiohttp.ClientSession() as http:
        status, answer = await call(
            http, "PUT", f"{base}/x", {"pattern": {"n": [{"numeric": [">", "z"]}]}, "targets": []}
        )
        assert status == 400 and "numeric" in answer["message"], answer
        status, answer = await call(http, "PUT", f"{base}/x", {"pattern": {"a": [1]}, "targets": [], "colour": 1})
        assert status == 400 and "unknown key 'colour'" in answer["message"]
        status, answer = await call(http, "PUT", f"{base}/from-file", {"pattern": {"a": [1]}, "targets": []})
        assert status == 409 and "operator.yaml" in answer["message"]
        status, answer = await call(http, "DELETE", f"{base}/from-file")
        assert status == 409
        status, answer = await call(http, "PUT", f"{serve.http_url}/sources/s", {"mqtt": "#"})
        assert status == 400 and "first level" in answer["message"]
    assert sorted(p.name for p in (serve.data_dir / "rules").iterdir()) == ["operator.yaml"]


async def test_source_life_cycle_through_the_api(serve: ServeProcess) -> None:
    async with aiohttp.ClientSession() as http:
        status, source = await call(http, "PUT", f"{serve.http_url}/sources/orders", {"topic": "orders"})
        assert status == 201 and source["state"] == "RUNNING" and source["type"] == "mqgate.message"
        status, source = await call(http, "PUT", f"{serve.http_url}/sources/orders/disable")
        assert status == 200 and source["state"] == "DISABLED"
        status, listed = await call(http, "GET", f"{serve.http_url}/sources")
        assert [s["name"] for s in listed] == ["orders"]
        status, _ = await call(http, "DELETE", f"{serve.http_url}/sources/orders")
        assert status == 204
        status, listed = await call(http, "GET", f"{serve.http_url}/sources")
        assert listed == []


async def test_a_scheduled_rule_through_the_api(serve: ServeProcess, target: TargetServer) -> None:
    base = f"{serve.http_url}/rules/default/nightly"
    rule = {"schedule": "rate(1 day)", "targets": [{"id": "a", "type": "http", "url": target.url}]}
    async with aiohttp.ClientSession() as http:
        before = time.time()
        status, created = await call(http, "PUT", base, rule)
        after = time.time()
        assert status == 201, created
        assert created["pattern"] is None and created["schedule"] == "rate(1 day)"
        # rate(1 day) fires at 00:00 UTC: the first midnight after the rule was made.
        midnights = {_rfc3339((int(moment) // 86400 + 1) * 86400) for moment in (before, after)}
        state = created["schedule_state"]
        assert state["state"] == "SCHEDULED" and state["next_fire"] in midnights, state
        assert (state["fires"], state["missed"], state["last_error"]) == (0, 0, None)
        status, answer = await call(http, "GET", f"{serve.http_url}/rules")
        assert answer["refused"] == []
        listed = answer["rules"]
        (nightly,) = [r for r in listed if r["name"] == "nightly"]
        assert nightly["schedule_state"]["next_fire"] == state["next_fire"]
        assert [r["schedule"] for r in listed if r["name"] == "from-file"] == [None]
        assert "schedule_state" not in next(r for r in listed if r["name"] == "from-file")

        status, both = await call(http, "PUT", base, {**rule, "schedule": "cron(0 9 ? * 2#1 *)",
                                                      "pattern": {"type": ["order"]}})  # fmt: skip
        assert status == 200 and both["schedule"] == "cron(0 9 ? * 2#1 *)" and both["pattern"] == {"type": ["order"]}
        assert both["schedule_state"]["next_fire"].endswith("T09:00:00Z")
        status, disabled = await call(http, "PUT", f"{base}/disable")
        assert status == 200 and disabled["schedule_state"] == {"state": "DISABLED", "next_fire": None}

        status, answer = await call(http, "PUT", base, {**rule, "schedule": "cron(0 25 * * ? *)"})
        assert status == 400 and "hours: 25 is out of range; give 0-23" in answer["message"], answer
        status, answer = await call(http, "PUT", base, {**rule, "schedule": "rate(1 days)"})
        assert status == 400 and "takes the singular unit, day" in answer["message"], answer
        status, answer = await call(http, "PUT", base, {"targets": rule["targets"]})
        assert status == 400 and "give a 'pattern', a 'schedule'" in answer["message"], answer
        status, kept = await call(http, "GET", base)
        assert kept["schedule"] == "cron(0 9 ? * 2#1 *)"  # refused changes leave the rule as it was


def _rfc3339(seconds: int) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).isoformat().replace("+00:00", "Z")


TYPO = """
rules:
  - name: cold
    patern: {type: [reading]}
    targets:
      - {id: t, type: http, url: "http://127.0.0.1:9/x"}
"""


async def wait_for_refusal(http: aiohttp.ClientSession, serve: ServeProcess, file: str) -> dict[str, Any]:
    """The entry of `file` in GET /rules's refused files, once the watcher has read it."""
    async with asyncio.timeout(20):
        while True:
            status, answer = await call(http, "GET", f"{serve.http_url}/rules")
            assert status == 200, answer
            found = [entry for entry in answer["refused"] if entry["file"].endswith(file)]
            if found:
                return found[0]
            await asyncio.sleep(0.1)


async def test_a_refused_rule_file_is_listed_with_its_error_and_named_by_its_rules(
    serve: ServeProcess, tmp_path: Path
) -> None:
    rules = tmp_path / "data" / "rules"
    (rules / "typo.yaml").write_text(TYPO)
    error = "typo.yaml:4:5: rule: unknown key 'patern'; did you mean 'pattern'?"
    async with aiohttp.ClientSession() as http:
        refused = await wait_for_refusal(http, serve, "typo.yaml")
        assert refused["error"].endswith(error) and refused["error"] == f"{refused['file']}:4:5: {refused['reason']}"
        assert (refused["line"], refused["column"], refused["rules"]) == (4, 5, ["default/cold"])
        # The rule the file was meant to define: not found, and why.
        status, answer = await call(http, "GET", f"{serve.http_url}/rules/default/cold")
        assert status == 404
        assert "rule 'cold' on bus 'default' is not in force: its file was refused: " in answer["message"]
        assert error in answer["message"]
        # Another missing rule: the refused files are named, as one may be meant to define it.
        status, answer = await call(http, "GET", f"{serve.http_url}/rules/default/elsewhere")
        assert status == 404 and "no rule 'elsewhere'" in answer["message"] and error in answer["message"]

        # An operator's file that was loaded, then broken: its rule runs as it was, and says its file is refused.
        (rules / "operator.yaml").write_text(OPERATOR_FILE.replace("pattern:", "pattern: {type: [x]}\n    patern:"))
        await wait_for_refusal(http, serve, "operator.yaml")
        status, kept = await call(http, "GET", f"{serve.http_url}/rules/default/from-file")
        assert status == 200 and kept["pattern"] == {"type": ["never"]}
        assert "operator.yaml:" in kept["file_error"] and "patern" in kept["file_error"]

        # Fixed: nothing refused any more, and the rule is there.
        (rules / "typo.yaml").write_text(TYPO.replace("patern", "pattern"))
        (rules / "operator.yaml").write_text(OPERATOR_FILE)
        async with asyncio.timeout(20):
            while (await call(http, "GET", f"{serve.http_url}/rules"))[1]["refused"]:
                await asyncio.sleep(0.1)
        status, fixed = await call(http, "GET", f"{serve.http_url}/rules/default/cold")
        assert status == 200 and fixed["file_error"] is None
