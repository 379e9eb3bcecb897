"""EventBridge on a cluster of separate processes (a NameServer and two broker groups, each `mqgate serve` with its
EventBridge door): a rule written on one node applies on both, events put on either node reach the rule's HTTP
target once each (exactly the reference evaluator's matches), and when the node running the target is killed its
delivery resumes on the other, nothing acknowledged lost."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.cluster.processes import ClusterProcesses
from tests.eventbridge.patterns.pattern_reference import reference_matches
from tests.eventbridge.target_server import TargetServer
from tests.serve_process import ServeProcess

pytestmark = pytest.mark.slow

GROUPS = ("broker-a", "broker-b")
PATTERN = {"source": ["sensors"], "data": {"level": [{"numeric": [">", 5]}]}}


def url(serve: ServeProcess, path: str) -> str:
    return serve.http_url + path


def make_events(prefix: str, count: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        {
            "specversion": "1.0",
            "id": f"{prefix}-{n}",
            "source": rng.choice(["sensors", "billing"]),
            "type": "reading",
            "datacontenttype": "application/json",
            "data": {"level": rng.randint(0, 10), "n": n},
        }
        for n in range(count)
    ]


async def put_events(session: aiohttp.ClientSession, serve: ServeProcess, events: list[dict[str, Any]]) -> None:
    for start in range(0, len(events), 50):
        batch = events[start : start + 50]
        async with session.post(
            url(serve, "/buses/default/events"),
            data=json.dumps(batch),
            headers={"Content-Type": "application/cloudevents-batch+json"},
        ) as response:
            assert response.status == 200, await response.text()
            answer = await response.json()
            assert answer["FailedEntryCount"] == 0, answer


async def put_rule(session: aiohttp.ClientSession, serve: ServeProcess, name: str, target_url: str) -> None:
    rule = {"pattern": PATTERN, "targets": [{"id": "hook", "type": "http", "url": target_url, "mode": "structured"}]}
    async with session.put(url(serve, f"/rules/default/{name}"), json=rule) as response:
        assert response.status in (200, 201), await response.text()


async def rule_on(session: aiohttp.ClientSession, serve: ServeProcess, name: str) -> dict[str, Any] | None:
    async with session.get(url(serve, f"/rules/default/{name}")) as response:
        return await response.json() if response.status == 200 else None


async def running_node(session: aiohttp.ClientSession, cluster: ClusterProcesses, name: str) -> str:
    """The group whose node runs the rule's target, once both nodes agree and it runs there."""
    for _ in range(200):
        rules = [await rule_on(session, cluster.brokers[group], name) for group in GROUPS]
        if all(rule is not None for rule in rules):
            nodes = {rule["targets"][0]["node"] for rule in rules if rule is not None}
            if len(nodes) == 1:
                node = nodes.pop()
                own = await rule_on(session, cluster.brokers[node], name)
                if own is not None and own["targets"][0]["state"] == "RUNNING":
                    return node
        await asyncio.sleep(0.1)
    raise AssertionError(f"no node runs rule {name}'s target")


@pytest.fixture
async def target():
    server = await TargetServer().start()
    yield server
    await server.stop()


async def test_a_rule_put_on_one_node_applies_on_both_and_events_put_on_either_reach_its_target_once(
    cluster: ClusterProcesses, target: TargetServer
):
    async with aiohttp.ClientSession() as session:
        await put_rule(session, cluster.brokers["broker-a"], "levels", target.url)
        # The file is on broker-b's disk before the API answered.
        assert (cluster.root / "broker-b" / "rules" / "api-rule@default@levels.yaml").exists()
        node = await running_node(session, cluster, "levels")
        assert node in GROUPS
        for group in GROUPS:  # every node's /metrics names the target's node
            async with session.get(url(cluster.brokers[group], "/metrics")) as response:
                text = await response.text()
            line = f'mqgate_eventbridge_target_node{{bus="default",node="{node}",rule="levels",target="hook"}} 1.0'
            assert line in text
            assert "mqgate_eventbridge_cluster_groups 2.0" in text
        events = make_events("a", 300, 1) + make_events("b", 300, 2)
        await put_events(session, cluster.brokers["broker-a"], events[:300])
        await put_events(session, cluster.brokers["broker-b"], events[300:])
        expected = [event["id"] for event in events if reference_matches(PATTERN, event)]
        assert 100 < len(expected) < 500
        await target.wait_for_all(expected, lambda received: received.attributes["id"], timeout_s=60)
        await asyncio.sleep(2.0)  # nothing more comes
        ids = target.ids()
        assert sorted(ids) == sorted(expected), "each matching event once, no other"


async def test_a_rule_deleted_on_the_other_node_is_gone_on_both(cluster: ClusterProcesses, target: TargetServer):
    async with aiohttp.ClientSession() as session:
        await put_rule(session, cluster.brokers["broker-b"], "short-lived", target.url)
        for _ in range(100):
            if await rule_on(session, cluster.brokers["broker-a"], "short-lived") is not None:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the rule put on broker-b never reached broker-a")
        async with session.delete(url(cluster.brokers["broker-a"], "/rules/default/short-lived")) as response:
            assert response.status == 204, await response.text()
        assert not (cluster.root / "broker-b" / "rules" / "api-rule@default@short-lived.yaml").exists()
        for _ in range(100):
            if await rule_on(session, cluster.brokers["broker-b"], "short-lived") is None:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("the rule deleted on broker-a is still on broker-b")


async def test_an_operator_s_rule_file_written_on_one_node_is_copied_to_the_other(
    cluster: ClusterProcesses, target: TargetServer
):
    rules = (
        "rules:\n  - name: from-file\n    pattern: {source: [files]}\n"
        f"    targets:\n      - {{id: hook, type: http, url: '{target.url}'}}\n"
    )
    (cluster.root / "broker-a" / "rules" / "ops.yaml").write_text(rules)
    copied = cluster.root / "broker-b" / "rules" / "ops.yaml"
    for _ in range(100):
        if copied.exists():
            break
        await asyncio.sleep(0.1)
    assert copied.read_text() == rules
    async with aiohttp.ClientSession() as session:
        for _ in range(100):
            if await rule_on(session, cluster.brokers["broker-b"], "from-file") is not None:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("broker-b did not load the copied file")


async def test_a_replay_asked_of_one_node_replays_what_every_node_archived_and_stored(
    cluster: ClusterProcesses, target: TargetServer
):
    async with aiohttp.ClientSession() as session:
        async with session.put(
            url(cluster.brokers["broker-b"], "/archives/everything"), json={"pattern": {"type": ["archived"]}}
        ) as response:
            assert response.status == 201, await response.text()
        for group in GROUPS:  # the archive runs on both nodes, each archiving what its group stores
            for _ in range(100):
                async with session.get(url(cluster.brokers[group], "/archives/everything")) as response:
                    if response.status == 200 and (await response.json())["state"] == "ENABLED":
                        break
                await asyncio.sleep(0.1)
            else:
                raise AssertionError(f"archive not enabled on {group}")
        events = [dict(e, type="archived") for e in make_events("r", 60, 5)]
        await put_events(session, cluster.brokers["broker-a"], events[:30])
        await put_events(session, cluster.brokers["broker-b"], events[30:])
        for _ in range(100):
            counts = []
            for group in GROUPS:
                async with session.get(url(cluster.brokers[group], "/archives/everything")) as response:
                    counts.append((await response.json())["event_count"])
            if sum(counts) == 60:
                break
            await asyncio.sleep(0.2)
        assert counts == [30, 30]
        # A rule made after the events, so that only the replays reach its target.
        rule = {"pattern": {"type": ["archived"]}, "targets": [{"id": "hook", "type": "http", "url": target.url}]}
        async with session.put(url(cluster.brokers["broker-a"], "/rules/default/replayed"), json=rule) as response:
            assert response.status == 201, await response.text()
        await running_node(session, cluster, "replayed")
        for name, extra in (("from-archive", {"archive": "everything"}), ("from-bus", {})):
            body = {"from": 0, "to": 4_000_000_000_000, "rule": "replayed", "name": name, **extra}
            async with session.post(url(cluster.brokers["broker-a"], "/buses/default/replays"), json=body) as response:
                assert response.status == 200, await response.text()
                answer = await response.json()
            assert answer["groups"] == ["broker-a", "broker-b"]
            assert answer["replayed"] == 30  # this node's part; broker-b replays its own
            expected = {(name, event["id"]) for event in events}
            await target.wait_for_all(
                expected, lambda received: (received.attributes.get("replayname"), received.attributes["id"]), 60
            )


async def test_the_target_moves_when_its_node_is_killed_and_nothing_acknowledged_is_lost(
    tmp_path: Path, target: TargetServer
):
    cluster = ClusterProcesses(tmp_path)
    try:
        async with aiohttp.ClientSession() as session:
            await put_rule(session, cluster.brokers["broker-a"], "moving", target.url)
            node = await running_node(session, cluster, "moving")
            other = next(group for group in GROUPS if group != node)
            before = make_events("before", 200, 3)
            await put_events(session, cluster.brokers[node], before[:100])
            await put_events(session, cluster.brokers[other], before[100:])
            cluster.brokers[node].kill()  # SIGKILL: its batch in flight and its last offsets with it
            after = make_events("after", 200, 4)
            await put_events(session, cluster.brokers[other], after)
            # The other node runs the target now, and delivers what was put on it.
            on_other = [e["id"] for e in before[100:] + after if reference_matches(PATTERN, e)]
            await target.wait_for_all(on_other, lambda received: received.attributes["id"], timeout_s=60)
            # The killed node is back: what it had acknowledged and not delivered is delivered.
            cluster.start_broker(node)
            cluster.wait_registered(GROUPS)
            expected = [e["id"] for e in before + after if reference_matches(PATTERN, e)]
            await target.wait_for_all(expected, lambda received: received.attributes["id"], timeout_s=60)
            assert set(target.ids()) == set(expected), "no event that did not match"
    finally:
        cluster.stop()
