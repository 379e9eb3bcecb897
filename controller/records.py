"""The controller's state in etcd, one broker group at a time (RocketMQ 5 keeps it in its controller's Raft log):

    /mqgate/<cluster>/<group>/record          the GroupRecord as JSON (master, epoch, SyncStateSet and its epoch),
                                              changed only by compare-and-set on its modification revision
    /mqgate/<cluster>/<group>/alive/<id>      each broker's Replica as JSON, under a lease it keeps alive: the
                                              heartbeat; a broker whose lease expires is gone

`GroupRecords` reads and writes them over aetcd; the rules that decide what to write are in election.py.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import aetcd

from controller.election import GroupRecord, Replica

ROOT = "/mqgate"


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A group's record (None before its first master) with the revision it was read at, and the alive brokers."""

    record: GroupRecord | None
    revision: int  # the record's modification revision; 0 when there is none
    alive: dict[int, Replica]


def record_json(record: GroupRecord) -> bytes:
    return json.dumps({
        "masterId": record.master_id, "masterAddress": record.master_address, "masterEpoch": record.master_epoch,
        "syncStateSet": sorted(record.sync_state_set), "syncStateSetEpoch": record.sync_state_set_epoch,
        "masterHaAddress": record.master_ha_address, "epochs": [list(entry) for entry in record.epochs],
    }).encode()  # fmt: skip


def parse_record(data: bytes) -> GroupRecord:
    value = json.loads(data)
    master = value.get("masterId")
    return GroupRecord(
        None if master is None else int(master), str(value.get("masterAddress", "")), int(value["masterEpoch"]),
        frozenset(int(member) for member in value.get("syncStateSet", [])), int(value.get("syncStateSetEpoch", 0)),
        str(value.get("masterHaAddress", "")),
        tuple((int(epoch), int(start)) for epoch, start in value.get("epochs", [])),
    )  # fmt: skip


def replica_json(replica: Replica) -> bytes:
    return json.dumps({"brokerId": replica.broker_id, "address": replica.address, "epoch": replica.epoch,
                       "maxOffset": replica.max_offset, "haAddress": replica.ha_address}).encode()  # fmt: skip


def parse_replica(data: bytes) -> Replica:
    value = json.loads(data)
    return Replica(
        int(value["brokerId"]), str(value["address"]), int(value["epoch"]), int(value["maxOffset"]),
        str(value.get("haAddress", "")),
    )  # fmt: skip


class GroupRecords:
    def __init__(self, client: aetcd.Client, cluster: str, group: str) -> None:
        self.client = client
        self.prefix = f"{ROOT}/{cluster}/{group}"
        self.record_key = f"{self.prefix}/record".encode()
        self.alive_prefix = f"{self.prefix}/alive/".encode()

    async def read(self) -> Snapshot:
        got = await self.client.get(self.record_key)
        record = parse_record(got.value) if got is not None else None
        revision = got.mod_revision if got is not None else 0
        alive = {}
        for item in await self.client.get_prefix(self.alive_prefix):
            replica = parse_replica(item.value)
            alive[replica.broker_id] = replica
        return Snapshot(record, revision, alive)

    async def replace(self, revision: int, record: GroupRecord) -> bool:
        """Write `record` if the stored one is still at `revision` (0: there is none yet); whether it was."""
        transactions = self.client.transactions
        compare = (
            [transactions.version(self.record_key) == 0]
            if revision == 0
            else [transactions.mod(self.record_key) == revision]
        )
        succeeded, _ = await self.client.transaction(
            compare=compare, success=[transactions.put(self.record_key, record_json(record))], failure=[]
        )
        return bool(succeeded)

    async def announce(self, replica: Replica, lease: aetcd.Lease) -> None:
        """This broker is alive, as `replica`, for as long as `lease` is kept alive."""
        await self.client.put(self.alive_prefix + str(replica.broker_id).encode(), replica_json(replica), lease=lease)
