"""The failover agent on a real etcd, with three brokers of one group open in this process (their stores linked
over loopback): the first becomes master, the others follow and join the SyncStateSet; when the master dies (its
agent stops refreshing its lease, its store closes) a member of the set is elected with the next epoch, holds every
acknowledged message at its offset, and takes writes; the old master, back, follows the new one."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from controller.agent import AgentSettings, FailoverAgent
from controller.records import GroupRecords
from core import Broker, BrokerConfig, BrokerRole, HAConfig, Message, SendStatus
from tests.core.conftest import open_broker_store
from tests.etcd_process import EtcdProcess

pytestmark = pytest.mark.slow

TOPIC = "fo"
HA_FAST = {"send_heartbeat_interval_ms": 200, "housekeeping_interval_ms": 2000, "slave_timeout_ms": 2000}


class Member:
    """One broker of the group: its store, broker and agent, in this process."""

    def __init__(self, root: Path, broker_id: int, etcd: str) -> None:
        self.root = root / f"b{broker_id}"
        self.broker_id = broker_id
        self.etcd = etcd
        self.broker: Broker | None = None
        self.agent: FailoverAgent | None = None

    async def start(self) -> None:
        settings = HAConfig(**HA_FAST, host="127.0.0.1", listen_port=0, controlled=True, broker_id=self.broker_id)
        store = open_broker_store(self.root, role=BrokerRole.SYNC_MASTER, ha=settings)
        self.broker = Broker(store, self.root / "config", BrokerConfig(broker_name="broker-a"))
        await self.broker.start()
        host, port = store.replication.master.address
        agent_settings = AgentSettings("C", "broker-a", self.broker_id, f"127.0.0.1:{10000 + self.broker_id}",
                                       f"{host}:{port}", sync=True, lease_ttl_s=2.0, tick_s=0.2)  # fmt: skip
        self.agent = FailoverAgent([self.etcd], agent_settings, self.broker.ha)
        await self.agent.start()

    async def die(self) -> None:
        """As a kill: the agent stops (its lease is left to expire), the store closes."""
        assert self.agent is not None and self.broker is not None
        await self.agent.close()
        await self.broker.close()
        self.broker.store.close()
        self.agent = self.broker = None

    @property
    def master(self) -> bool:
        return self.broker is not None and self.broker.ha.role is not BrokerRole.SLAVE


async def until(check, timeout=30.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        await asyncio.sleep(0.05)


@pytest.fixture
async def group(tmp_path) -> AsyncIterator[tuple[list[Member], str]]:
    etcd = EtcdProcess(tmp_path / "etcd")
    members = [Member(tmp_path, n, etcd.address) for n in (1, 2, 3)]
    try:
        yield members, etcd.address
    finally:
        for member in members:
            if member.broker is not None:
                await member.die()
        etcd.stop()


async def record_of(etcd: str):
    import aetcd

    host, _, port = etcd.rpartition(":")
    async with aetcd.Client(host=host, port=int(port)) as client:
        return (await GroupRecords(client, "C", "broker-a").read()).record


async def send_until_ok(broker: Broker, body: bytes, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = await broker.send(Message(TOPIC, body, queue_id=0))
            if result.status is SendStatus.SEND_OK:
                return result
        except Exception:
            pass
        assert time.monotonic() < deadline, "no SEND_OK within the time"
        await asyncio.sleep(0.1)


async def test_a_member_of_the_set_takes_over_with_every_acknowledged_message(group):
    members, etcd = group
    first, *others = members
    await first.start()
    await until(lambda: first.master)
    first.broker.create_topic(TOPIC, queue_nums=1)
    for member in others:
        await member.start()
    await until(lambda: all(m.broker.ha.state().master is not None for m in others))

    acked = {}
    for n in range(100):
        result = await send_until_ok(first.broker, f"m{n}".encode())
        acked[result.queue_offset] = f"m{n}".encode()
    record = await record_of(etcd)
    assert record.master_id == 1 and record.sync_state_set == {1, 2, 3}

    await first.die()
    await until(lambda: any(m.master for m in others), timeout=20)
    new = next(m for m in others if m.master)
    record = await record_of(etcd)
    assert record.master_id == new.broker_id and record.master_epoch == 2
    got = new.broker.store.get_messages(TOPIC, 0, 0, max_count=1000, max_bytes=2**30).messages
    held = {m.queue_offset: m.body for m in got}
    # Sends refused while the set was still forming (SLAVE_NOT_AVAILABLE) stay in the log, as in RocketMQ.
    assert {offset: held.get(offset) for offset in acked} == acked

    after = await send_until_ok(new.broker, b"after")
    assert after.queue_offset >= len(got)  # tries refused until the other slave joined the set are in the log too

    await first.start()  # back, as a slave of the new master
    await until(lambda: first.broker.ha.state().master is not None and not first.master)
    await until(lambda: first.broker.store.end_offset == new.broker.store.end_offset)
    await first.broker.store.wait_visible()
    again = first.broker.store.get_messages(TOPIC, 0, 0, max_count=1000, max_bytes=2**30).messages
    theirs = new.broker.store.get_messages(TOPIC, 0, 0, max_count=1000, max_bytes=2**30).messages
    assert [(m.queue_offset, m.body) for m in again] == [(m.queue_offset, m.body) for m in theirs]
    assert again[after.queue_offset].body == b"after"
