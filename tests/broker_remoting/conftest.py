"""A broker on a real store with its remoting port and a NameServer, both on loopback port 0, in the test's process,
and a remoting client to talk to them; for the tests of the door's request codes (the tests of `mqgate serve` with
real RocketMQ 4 clients start the process instead)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from broker_remoting.config import RemotingConfig
from broker_remoting.door import BrokerRemoting
from core import Broker, BrokerConfig
from namesrv.server import NameServer
from remoting.channel import Channel
from remoting.client import RemotingClient
from remoting.command import RemotingCommand
from tests.core.conftest import open_broker_store


@dataclass
class Door:
    broker: Broker
    door: BrokerRemoting
    namesrv: NameServer
    namesrv_address: str
    client: RemotingClient
    # Requests the broker sent the client (check-backs, group notices).
    heard: list[RemotingCommand] = field(default_factory=list)

    @property
    def address(self) -> str:
        return self.door.address

    async def ask(self, request: RemotingCommand, timeout_s: float = 10.0) -> RemotingCommand:
        return await self.client.invoke(self.address, request, timeout_s)

    async def ask_namesrv(self, request: RemotingCommand) -> RemotingCommand:
        return await self.client.invoke(self.namesrv_address, request, 10.0)


@pytest.fixture
async def door(tmp_path: Path) -> AsyncIterator[Door]:
    store = open_broker_store(tmp_path)
    broker = Broker(store, tmp_path / "config", BrokerConfig(transaction_timeout_ms=60_000))
    await broker.start()
    namesrv = NameServer()
    namesrv_port = await namesrv.start("127.0.0.1", 0)
    remoting = BrokerRemoting(broker, RemotingConfig(host="127.0.0.1", port=0), max_body_bytes=1 << 20)
    await remoting.start([f"127.0.0.1:{namesrv_port}"])
    heard: list[RemotingCommand] = []

    async def on_request(channel: Channel, request: RemotingCommand) -> None:
        heard.append(request)

    client = RemotingClient(on_request)
    try:
        assert remoting.registration is not None
        await asyncio.wait_for(remoting.registration.registered.wait(), 10)
        yield Door(broker, remoting, namesrv, f"127.0.0.1:{namesrv_port}", client, heard)
    finally:
        await client.close()
        await remoting.close()
        await namesrv.close()
        await broker.close()
        store.close()
