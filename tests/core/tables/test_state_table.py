"""StateTable: changes kept in a core queue, a JSON snapshot saying where to replay from."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.errors import ConfigFileError
from core.store.message import Message, StoredMessage
from core.tables.state_table import StateTable

TOPIC = "STATE"


def decode(message: StoredMessage) -> tuple[str, str | None]:
    return message.properties["K"], message.body.decode() or None


def table(broker, snapshot: Path) -> StateTable[str]:
    return StateTable(broker, TOPIC, snapshot, decode, lambda v: v, lambda v: str(v))


async def change(broker, state: StateTable[str], key: str, value: str | None) -> None:
    await broker.send(Message(TOPIC, (value or "").encode(), properties={"K": key}))
    state.changed(key, value)


async def test_changes_past_the_snapshot_are_replayed(make_broker, tmp_path):
    broker = await make_broker()
    broker.create_topic(TOPIC, 1)
    snapshot = tmp_path / "state.json"
    state = table(broker, snapshot)
    await state.load()
    await change(broker, state, "a", "1")
    await change(broker, state, "b", "2")
    state.save()
    await change(broker, state, "a", None)
    await change(broker, state, "c", "3")
    while broker.max_offset(TOPIC, 0) < 4:  # until the dispatcher made the fourth change visible
        await broker.wait_for_message(TOPIC, 0, broker.max_offset(TOPIC, 0), 1)

    again = table(broker, snapshot)
    await again.load()
    assert again.entries == {"b": "2", "c": "3"}
    assert json.loads(snapshot.read_text())["entries"] == {"a": "1", "b": "2"}


async def test_a_snapshot_of_the_wrong_shape_is_a_config_file_error(make_broker, tmp_path):
    broker = await make_broker()
    broker.create_topic(TOPIC, 1)
    snapshot = tmp_path / "state.json"
    snapshot.write_text('{"offset": 0, "entries": []}')
    with pytest.raises(ConfigFileError, match=r"state\.json: expected an object with 'offset' and 'entries'"):
        await table(broker, snapshot).load()
