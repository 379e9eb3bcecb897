"""A cluster in the test's process: one NameServer and broker groups on real stores, each with its remoting port,
all on loopback port 0 (the tests of `mqgate serve` processes in a cluster are tests/cluster/)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker_remoting.config import RemotingConfig
from broker_remoting.door import BrokerRemoting
from core import Broker, BrokerConfig, MessageStore, Perm
from namesrv.server import NameServer
from tests.core.conftest import open_broker_store


@dataclass
class Group:
    name: str
    broker: Broker
    door: BrokerRemoting
    store: MessageStore

    async def close(self) -> None:
        await self.door.close()
        await self.broker.close()
        self.store.close()


@dataclass
class LocalCluster:
    namesrv: NameServer
    namesrv_address: str
    groups: dict[str, Group]
    root: Path

    async def add_group(self, name: str, **config: object) -> Group:
        store = open_broker_store(self.root / name)
        broker = Broker(store, self.root / name / "config", BrokerConfig(broker_name=name, **config))  # type: ignore[arg-type]
        await broker.start()
        door = BrokerRemoting(broker, RemotingConfig(host="127.0.0.1", port=0), max_body_bytes=1 << 20)
        await door.start([self.namesrv_address])
        assert door.registration is not None
        await asyncio.wait_for(door.registration.registered.wait(), 10)
        group = self.groups[name] = Group(name, broker, door, store)
        return group

    async def create_topic(self, topic: str, queues: int = 4) -> None:
        for group in self.groups.values():
            group.broker.admin.create_topic(topic, queues, queues, Perm.READ | Perm.WRITE)
        for group in self.groups.values():  # the change registers at once; wait for the NameServer to have it
            for _ in range(100):
                route = self.namesrv.routes.route(topic)
                if route is not None and any(q["brokerName"] == group.name for q in route["queueDatas"]):
                    break
                await asyncio.sleep(0.02)


@pytest.fixture
async def local_cluster(tmp_path: Path) -> AsyncIterator[LocalCluster]:
    namesrv = NameServer()
    port = await namesrv.start("127.0.0.1", 0)
    cluster = LocalCluster(namesrv, f"127.0.0.1:{port}", {}, tmp_path)
    try:
        await cluster.add_group("broker-a")
        await cluster.add_group("broker-b")
        yield cluster
    finally:
        for group in cluster.groups.values():
            await group.close()
        await namesrv.close()
