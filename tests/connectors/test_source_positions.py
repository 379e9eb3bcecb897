"""Source positions named with their broker group: a position committed on this node's group is scanned forward in
its queue as before; one committed on another node (the task moved here) is resumed as committed, and the
partition's records go to this group's queue from then on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from connectors import api
from connectors.position_table import CommittedPosition, PositionTable
from connectors.source_runner import SourceRunner


class NoSource(api.SourceTask):
    async def start(self, config: dict[str, Any], context: api.TaskContext) -> None:
        pass

    async def poll(self) -> list[api.SourceRecord]:
        return []


def test_a_position_names_its_group_and_one_without_is_read_as_before():
    named = CommittedPosition({"line": 3}, "lines", 1, 40, "broker-b")
    assert CommittedPosition.from_json(named.to_json()) == named
    old = {"position": {"line": 3}, "topic": "lines", "queue_id": 1, "offset": 40}
    assert CommittedPosition.from_json(old) == CommittedPosition({"line": 3}, "lines", 1, 40, "")
    assert "group" not in CommittedPosition({"line": 3}, "lines", 1, 40).to_json()


async def test_a_position_committed_on_another_group_is_resumed_as_committed_and_continued_here(
    make_broker, tmp_path: Path
):
    broker = await make_broker()  # broker-a
    broker.create_topic("lines", 2)
    positions = PositionTable(broker, tmp_path / "offsets.json")
    await positions.load()
    try:
        elsewhere = CommittedPosition({"line": 7}, "lines", 1, 500, "broker-b")
        await positions.commit("src", '{"file":"x"}', elsewhere)
        runner = SourceRunner(broker, positions, "src", 0, NoSource(), {})
        recovered = await runner.recover()
        # Not scanned: offset 500 is broker-b's, not a place in this group's queue.
        assert recovered == {'{"file":"x"}': elsewhere}
        runner._entries = recovered
        entry = await runner._entry('{"file":"x"}', "lines")
        assert entry.group == "broker-a" and entry.position == {"line": 7}
        assert entry.offset == broker.max_offset("lines", entry.queue_id)
        assert positions.of_connector("src")['{"file":"x"}'] == entry
    finally:
        await positions.close()
