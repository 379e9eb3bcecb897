"""The controller's records on a real etcd: a group's record written only over the revision it was read at (two
electors racing, one wins), brokers alive while their leases are kept, gone when not."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aetcd
import pytest

from controller.election import GroupRecord, Replica
from controller.records import GroupRecords
from tests.etcd_process import EtcdProcess


@pytest.fixture
async def client(tmp_path) -> AsyncIterator[aetcd.Client]:
    etcd = EtcdProcess(tmp_path / "etcd")
    connection = aetcd.Client(host="127.0.0.1", port=etcd.client_port)
    try:
        yield connection
    finally:
        await connection.close()
        etcd.stop()


async def test_the_record_changes_only_over_the_revision_read(client):
    records = GroupRecords(client, "C", "broker-a")
    empty = await records.read()
    assert (empty.record, empty.revision, empty.alive) == (None, 0, {})
    first = GroupRecord(0, "10.0.0.1:10911", 1, frozenset({0}), 1)
    assert await records.replace(0, first)
    assert not await records.replace(0, first)  # someone wrote it first
    read = await records.read()
    assert read.record == first and read.revision > 0
    elections = [
        GroupRecord(1, "10.0.0.2:10911", 2, frozenset({1}), 2),
        GroupRecord(2, "10.0.0.3:10911", 2, frozenset({2}), 2),
    ]
    won = await asyncio.gather(*(records.replace(read.revision, record) for record in elections))
    assert sorted(won) == [False, True]
    assert (await records.read()).record == elections[won.index(True)]


async def test_a_broker_is_alive_while_its_lease_is_kept(client):
    records = GroupRecords(client, "C", "broker-a")
    kept, lapsing = await client.lease(2), await client.lease(1)
    await records.announce(Replica(0, "10.0.0.1:10911", 1, 500), kept)
    await records.announce(Replica(1, "10.0.0.2:10911", 1, 480), lapsing)
    assert set((await records.read()).alive) == {0, 1}
    for _ in range(50):
        await kept.refresh()
        if set((await records.read()).alive) == {0}:
            break
        await asyncio.sleep(0.2)
    alive = (await records.read()).alive
    assert set(alive) == {0} and alive[0] == Replica(0, "10.0.0.1:10911", 1, 500)
