"""Connector configs kept in the core: the keyed table `connect-configs` (core/tables/state_table.py), one entry per
connector, `{"config": {...flat strings...}, "paused": bool}`; a change is one message in queue 0 whose
property `CONNECT_CONFIG_NAME` names the connector and whose body is the entry as JSON (empty: deleted)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from core import Broker, Message, StateTable, StoredMessage

TOPIC = "connect-configs"
PROPERTY_NAME = "CONNECT_CONFIG_NAME"


@dataclass(slots=True, frozen=True)
class StoredConfig:
    config: dict[str, str]
    paused: bool = False

    def to_json(self) -> dict[str, object]:
        return {"config": self.config, "paused": self.paused}

    @classmethod
    def from_json(cls, value: object) -> StoredConfig:
        if not isinstance(value, dict) or not isinstance(value.get("config"), dict):
            raise ValueError("expected an object with 'config'")
        config = value["config"]
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in config.items()):
            raise ValueError("config values must be strings")
        return cls(dict(config), bool(value.get("paused", False)))


def _decode(message: StoredMessage) -> tuple[str, StoredConfig | None] | None:
    name = message.properties.get(PROPERTY_NAME)
    if name is None:
        return None
    if not message.body:
        return name, None
    return name, StoredConfig.from_json(json.loads(message.body))


class ConfigTable:
    def __init__(self, broker: Broker, snapshot: Path) -> None:
        self.broker = broker
        self.table: StateTable[StoredConfig] = StateTable(
            broker, TOPIC, snapshot, _decode, StoredConfig.to_json, StoredConfig.from_json
        )

    @property
    def entries(self) -> dict[str, StoredConfig]:
        return self.table.entries

    async def load(self) -> None:
        if not self.broker.has_topic(TOPIC):
            self.broker.create_topic(TOPIC, 1)
        await self.table.load()
        self.table.start()

    async def close(self) -> None:
        await self.table.close()

    async def put(self, name: str, stored: StoredConfig | None) -> None:
        """Store the entry (None: delete it); returns once the change is in the core."""
        body = b"" if stored is None else json.dumps(stored.to_json(), sort_keys=True).encode()
        await self.broker.send(Message(TOPIC, body, 0, {PROPERTY_NAME: name}))
        self.table.changed(name, stored)
