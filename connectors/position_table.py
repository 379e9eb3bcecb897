"""Source positions kept in the core: the keyed table `connect-offsets` (core/tables/state_table.py).

Key: JSON `[connector, partition key]` (api.partition_key). Value: `{"position": {...} | null, "topic": t,
"queue_id": q, "offset": o}`: the position reached and the queue offset it covers, i.e. every record of the
partition at or past `offset` in that queue is newer than `position`. A partition gets its entry (position null,
offset the queue's end) before its first record is sent, so after a crash every partition that has records in
the core has an entry to start the scan of its queue from. A change is one message in queue 0 with property
`CONNECT_OFFSET_KEY` and the value as JSON in the body.

On a cluster the value also names the broker `group` whose queue it is (absent: the node's own), and every commit is
also written to the cluster's shared table of positions (peers/shared_table.py), which is what the node a task moves
to reads: the latest commit of each partition, wherever it was made.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import Broker, Message, StateTable, StoredMessage
from peers.shared_table import SharedTable

TOPIC = "connect-offsets"
PROPERTY_KEY = "CONNECT_OFFSET_KEY"


@dataclass(slots=True, frozen=True)
class CommittedPosition:
    position: dict[str, Any] | None
    topic: str
    queue_id: int
    offset: int
    group: str = ""  # the broker group of the queue ("": the node's own, as before groups were named)

    def to_json(self) -> dict[str, object]:
        value: dict[str, object] = {
            "position": self.position, "topic": self.topic, "queue_id": self.queue_id, "offset": self.offset,
        }  # fmt: skip
        if self.group:
            value["group"] = self.group
        return value

    @classmethod
    def from_json(cls, value: object) -> CommittedPosition:
        if not isinstance(value, dict):
            raise ValueError("expected an object")
        position = value.get("position")
        if position is not None and not isinstance(position, dict):
            raise ValueError("position must be an object or null")
        group = str(value.get("group") or "")
        return cls(position, str(value["topic"]), int(value["queue_id"]), int(value["offset"]), group)


def table_key(connector: str, partition_key: str) -> str:
    return json.dumps([connector, partition_key], separators=(",", ":"))


def _decode(message: StoredMessage) -> tuple[str, CommittedPosition | None] | None:
    key = message.properties.get(PROPERTY_KEY)
    if key is None:
        return None
    return key, CommittedPosition.from_json(json.loads(message.body))


class PositionTable:
    def __init__(self, broker: Broker, snapshot: Path, shared: SharedTable | None = None) -> None:
        """`shared`: the cluster's table of positions (on a cluster)."""
        self.broker = broker
        self.shared = shared
        self.table: StateTable[CommittedPosition] = StateTable(
            broker, TOPIC, snapshot, _decode, CommittedPosition.to_json, CommittedPosition.from_json
        )

    async def load(self) -> None:
        if not self.broker.has_topic(TOPIC):
            self.broker.create_topic(TOPIC, 1)
        await self.table.load()
        self.table.start()

    async def close(self) -> None:
        await self.table.close()

    def of_connector(self, connector: str) -> dict[str, CommittedPosition]:
        """The committed positions of a connector's partitions, by partition key (on a cluster, the latest of every
        node's)."""
        found = {}
        entries: dict[str, object] = dict(self.table.entries)
        if self.shared is not None:
            entries = self.shared.entries()
        for key, value in entries.items():
            name, partition = json.loads(key)
            if name == connector:
                found[partition] = value if isinstance(value, CommittedPosition) else CommittedPosition.from_json(value)
        return found

    async def commit(self, connector: str, partition_key: str, committed: CommittedPosition) -> None:
        key = table_key(connector, partition_key)
        body = json.dumps(committed.to_json(), sort_keys=True).encode()
        await self.broker.send(Message(TOPIC, body, 0, {PROPERTY_KEY: key}))
        self.table.changed(key, committed)
        if self.shared is not None:
            await self.shared.put(key, committed.to_json())
