"""The controller's agent in each broker (RocketMQ 5's ReplicasManager, with etcd in place of its controller): it
keeps the broker's lease, says how far its log reaches, and moves the broker between roles as the group's record
in etcd says.

Every `tick_s` it reads the record and the alive brokers (controller.records) and:

- **no record yet** (a new group): the best alive broker (election.elect over all of them) writes the first record,
  epoch 1, and becomes master;
- **the master is this broker**: it keeps the SyncStateSet (election.next_sync_state_set) from its slaves' reports:
  a slave that caught up joins (the store waits for it at once, the record follows), one behind for
  `max_not_caught_up_s` leaves (the record first, then the store stops waiting for it);
- **the master is another, alive**: this broker follows it (core's become_slave: the log cut to what it shares with
  the record's epochs, then copied);
- **the master is another, gone** (its lease expired): if election.elect names this broker, it stops copying,
  writes the new record (epoch + 1, starting at its log's end) by compare-and-set, and becomes master; two
  candidates racing, one write wins and the other follows.

Fencing: the lease is refreshed every `lease_ttl_s / 5`. A master that has not had a refresh acknowledged for
`lease_ttl_s - FENCE_MARGIN_S` since the refresh was sent refuses writes at once (store.fence): etcd cannot expire
the lease, and so no other broker can be elected, before that. A refresh that gets through lifts the fence while
the lease is the same; a new lease (the old one expired) must win the record back by compare-and-set first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import aetcd

from controller.election import MAX_EPOCHS, MAX_NOT_CAUGHT_UP_S, GroupRecord, Replica, elect, next_sync_state_set
from controller.records import GroupRecords, Snapshot
from core import BrokerRole, Replication

log = logging.getLogger(__name__)

# A master fences itself this long before etcd may expire its lease, counted from the last refresh that etcd
# acknowledged (from when it was sent).
FENCE_MARGIN_S = 1.5
# How often the lease's deadline is looked at.
FENCE_CHECK_S = 0.1
LOST_LEASE = (
    "this broker lost its lease in etcd (it cannot reach the controller): a new master may be elected, so it takes"
    " no writes; send to the group's master"
)


@dataclass(frozen=True, slots=True)
class AgentSettings:
    cluster: str
    group: str
    broker_id: int
    address: str  # the remoting address clients reach
    ha_address: str  # host:port of the HA port, where slaves connect if this broker is master
    sync: bool  # SYNC_MASTER once master (else ASYNC_MASTER)
    lease_ttl_s: float = 5.0
    tick_s: float = 0.5
    allow_unclean: bool = False  # RocketMQ's enableElectUncleanMaster
    max_not_caught_up_s: float = MAX_NOT_CAUGHT_UP_S


class FailoverAgent:
    def __init__(
        self,
        endpoints: list[str],
        settings: AgentSettings,
        replication: Replication,
        role_changed: Callable[[], None] = lambda: None,
    ) -> None:
        self.endpoints = endpoints
        self.settings = settings
        self.ha = replication
        self.role_changed = role_changed
        self.client: aetcd.Client | None = None
        self.records: GroupRecords | None = None
        self._lease: aetcd.Lease | None = None
        self._lease_ok_until = 0.0
        self._tasks: list[asyncio.Task[None]] = []
        self._following: tuple[int, int] | None = None  # (master id, epoch) this broker follows
        self._caught_up_at: dict[int, float] = {}
        self._end_last_tick = 0
        self.master_id: int | None = None  # the master it follows
        self.elections_won = 0
        # Set once the broker follows a master or is one: the role the group's record gives it.
        self.decided = asyncio.Event()
        self.epoch = 0  # the epoch of the master it is or follows

    @property
    def operation_timeout_s(self) -> float:
        return max(self.settings.lease_ttl_s / 3, 0.5)

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._keep_lease()), loop.create_task(self._watch_lease()),
                       loop.create_task(self._run())]  # fmt: skip

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.close()
            self.client = None

    # --- etcd ---

    async def _connect(self) -> aetcd.Client:
        if self.client is not None:
            return self.client
        last: Exception | None = None
        for endpoint in self.endpoints:
            host, _, port = endpoint.rpartition(":")
            client = aetcd.Client(host=host or "127.0.0.1", port=int(port), timeout=self.operation_timeout_s)
            try:
                async with asyncio.timeout(self.operation_timeout_s):
                    await client.connect()
                    await client.get(b"/mqgate")
            except Exception as exc:  # aetcd raises its own errors and grpc's
                last = exc
                with contextlib.suppress(Exception):
                    await client.close()
                continue
            self.client = client
            self.records = GroupRecords(client, self.settings.cluster, self.settings.group)
            return client
        raise ConnectionError(f"no etcd endpoint of {self.endpoints} answers: {last}")

    async def _drop_client(self) -> None:
        client, self.client, self.records = self.client, None, None
        self._lease = None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    async def _keep_lease(self) -> None:
        ttl = self.settings.lease_ttl_s
        while True:
            lease = self._lease
            if lease is not None:
                sent = time.monotonic()
                try:
                    async with asyncio.timeout(self.operation_timeout_s):
                        reply = await lease.refresh()
                    if reply is not None and reply.TTL > 0:
                        self._lease_ok_until = sent + ttl - FENCE_MARGIN_S
                    else:
                        self._lease = None  # expired: the next tick takes a new one and wins the record back
                except Exception as exc:
                    log.debug("etcd lease refresh failed: %s", exc)
            await asyncio.sleep(min(ttl / 5, 0.2) if self._lease is None else ttl / 5)

    async def _watch_lease(self) -> None:
        """Fence a master whose lease may be about to end, on a task of its own: a call to etcd that hangs (a cut
        link: packets just stop) must not hold the fence back."""
        while True:
            if time.monotonic() >= self._lease_ok_until and self.ha.role is not BrokerRole.SLAVE:
                self.ha.fence(LOST_LEASE)
            await asyncio.sleep(FENCE_CHECK_S)

    # --- the loop ---

    async def _run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(max(self.operation_timeout_s * 4, 5.0)):
                    await self.tick()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("controller agent (%s/%s): %s", self.settings.group, self.settings.broker_id, exc)
                await self._drop_client()
            await asyncio.sleep(self.settings.tick_s)

    def me(self) -> Replica:
        epochs = self.ha.epochs()
        s = self.settings
        return Replica(s.broker_id, s.address, epochs[-1][0] if epochs else 0, self.ha.end_offset, s.ha_address)

    async def tick(self) -> None:
        await self._connect()
        assert self.client is not None and self.records is not None
        renewed = False
        if self._lease is None:
            self._lease = await self.client.lease(max(round(self.settings.lease_ttl_s), 1))
            self._lease_ok_until = time.monotonic() + self.settings.lease_ttl_s - FENCE_MARGIN_S
            renewed = True
        await self.records.announce(self.me(), self._lease)
        snapshot = await self.records.read()
        record = snapshot.record
        me = self.settings.broker_id
        if record is None:
            await self._elect(snapshot)
        elif record.master_id == me:
            if self.ha.role is BrokerRole.SLAVE:
                # Restarted, or demoted meanwhile: it takes a new epoch itself, not through an election, as the
                # others follow the record's master while it is alive and would never elect one.
                await self._take_over(snapshot)
            elif renewed:
                if await self.records.replace(snapshot.revision, record):  # win the record back before writing
                    self.ha.fence(None)
            else:
                if time.monotonic() < self._lease_ok_until:
                    self.ha.fence(None)
                await self._keep_sync_state_set(snapshot, record)
        elif record.master_id in snapshot.alive:
            await self._follow(record)
        else:
            await self._elect(snapshot)

    async def _follow(self, record: GroupRecord) -> None:
        assert record.master_id is not None
        if self._following == (record.master_id, record.master_epoch) and self.ha.role is BrokerRole.SLAVE:
            return
        self.master_id = record.master_id
        cut = await self.ha.become_slave(record.master_ha_address, list(record.epochs))
        self._following = (record.master_id, record.master_epoch)
        self.epoch = record.master_epoch
        self.decided.set()
        log.info("broker %s/%d follows master %d (epoch %d) at %s%s", self.settings.group, self.settings.broker_id,
                 record.master_id, record.master_epoch, record.master_ha_address,
                 f", {cut} bytes of its own log past what it shares cut" if cut else "")  # fmt: skip
        self.role_changed()

    async def _elect(self, snapshot: Snapshot) -> None:
        alive = {**snapshot.alive, self.settings.broker_id: self.me()}
        record = snapshot.record
        if record is None:
            base = GroupRecord(None, "", 0, frozenset(alive), 0)  # a new group: every alive broker may be chosen
            election = elect(base, alive)
        else:
            election = elect(record, alive, self.settings.allow_unclean)
        if election is None or election.record.master_id != self.settings.broker_id:
            return
        if election.unclean:
            log.warning("broker %s/%d: no member of the SyncStateSet is alive; elected outside it"
                        " (enable_elect_unclean_master): messages only the old set held are lost",
                        self.settings.group, self.settings.broker_id)  # fmt: skip
        await self._take_over(snapshot)

    async def _take_over(self, snapshot: Snapshot) -> None:
        assert self.records is not None
        record = snapshot.record
        s = self.settings
        self._following = None
        end = await self.ha.stop_following()
        epoch = (record.master_epoch if record is not None else 0) + 1
        past = record.epochs[-MAX_EPOCHS + 1 :] if record is not None else ()
        new = GroupRecord(
            s.broker_id, s.address, epoch, frozenset({s.broker_id}),
            (record.sync_state_set_epoch if record is not None else 0) + 1, s.ha_address, (*past, (epoch, end)),
        )  # fmt: skip
        if not await self.records.replace(snapshot.revision, new):
            log.info("broker %s/%d: another broker was elected first", s.group, s.broker_id)
            return
        await self.ha.become_master(epoch, s.sync)
        self.master_id = s.broker_id
        self.ha.set_in_sync(frozenset())
        self._caught_up_at.clear()
        self._end_last_tick = end
        self.elections_won += 1
        self.epoch = epoch
        self.decided.set()
        log.warning("broker %s/%d is master of epoch %d from commit-log offset %d", s.group, s.broker_id, epoch, end)
        self.role_changed()

    async def _keep_sync_state_set(self, snapshot: Snapshot, record: GroupRecord) -> None:
        assert self.records is not None
        me = self.settings.broker_id
        now = time.monotonic()
        end_before = self._end_last_tick
        self._end_last_tick = self.ha.end_offset
        acked = {slave.broker_id: slave.acked_offset for slave in self.ha.state().slaves if slave.broker_id is not None}
        for broker_id, offset in acked.items():
            if offset >= end_before:
                self._caught_up_at[broker_id] = now
        members = [acked.get(member, -1) for member in record.sync_state_set if member != me]
        confirm = min(members) if members else end_before
        wanted = next_sync_state_set(
            record.sync_state_set, me, confirm, acked, self._caught_up_at, now, self.settings.max_not_caught_up_s
        )
        if wanted == record.sync_state_set:
            self.ha.set_in_sync(record.sync_state_set - {me})
            return
        self.ha.set_in_sync((record.sync_state_set | wanted) - {me})  # wait for newcomers before the record says so
        new = replace(record, sync_state_set=wanted, sync_state_set_epoch=record.sync_state_set_epoch + 1)
        if await self.records.replace(snapshot.revision, new):
            self.ha.set_in_sync(wanted - {me})
            log.info("broker %s/%d: SyncStateSet %s", self.settings.group, me, sorted(wanted))
        else:
            self.ha.set_in_sync(record.sync_state_set - {me})
