"""A broker's place in its group's replication (core.store.ha), as the doors ask it: its role, the HA port its slaves
connect to or the master it follows, the state of its links, and whether a read lies so far behind that a slave
should serve it (RocketMQ's suggestPullingFromSlave).

Under automatic failover the controller's agent changes the role here: the store's (core.store.ha.role) and the
master's services with it (core.replication.master_services), which start once the broker takes writes and stop
before it follows another master.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from core.store.config import BrokerRole
from core.store.ha.states import ReplicationState
from core.store.message import StoredMessage
from core.store.message_store import MessageStore

Epochs = list[tuple[int, int]]  # (epoch, start offset), oldest first


class Replication:
    def __init__(
        self,
        store: MessageStore,
        start_services: Callable[[], Awaitable[None]],
        stop_services: Callable[[], Awaitable[None]],
        role_changed: Callable[[], None],
    ) -> None:
        self._store = store
        self._start_services = start_services
        self._stop_services = stop_services
        self._role_changed = role_changed
        self._changing = asyncio.Lock()

    @property
    def role(self) -> BrokerRole:
        """ASYNC_MASTER, SYNC_MASTER or SLAVE: as [broker] broker_role set it, or as the controller named it."""
        return self._store.replication.role

    @property
    def controlled(self) -> bool:
        """Whether the controller (etcd) names this broker's role (automatic failover)."""
        return self._store.replication.controlled

    def nameserver_id(self, configured: int) -> int:
        """The broker id to register with the NameServers: the configured one, or 0 (the master's) while the
        controller has made this broker its group's master (RocketMQ 5's controller mode registers so too)."""
        return 0 if self.controlled and self.role is not BrokerRole.SLAVE else configured

    def epochs(self) -> Epochs:
        """The epochs of this broker's log."""
        return self._store.replication.epochs.entries

    @property
    def end_offset(self) -> int:
        return self._store.end_offset

    async def stop_following(self) -> int:
        """Stop copying the master's log (a candidate in an election); the log's end, which no longer grows."""
        async with self._changing:
            return await asyncio.to_thread(self._store.replication.stop_following)

    async def become_master(self, epoch: int, sync: bool) -> int:
        """Take writes as the group's master of `epoch` (SYNC_MASTER if `sync`), then start the master's services;
        the offset the epoch begins at."""
        async with self._changing:
            start = await asyncio.to_thread(self._store.become_master, epoch, sync)
            self._role_changed()
            await self._start_services()
            return start

    async def become_slave(self, master_ha_address: str, epochs: Epochs) -> int:
        """Stop taking writes and the master's services, cut the log to what it shares with the new master's
        `epochs`, and follow that master (its HA port at `master_ha_address`); the number of bytes cut."""
        async with self._changing:
            if self.role is not BrokerRole.SLAVE:
                self._store.fence("this broker is leaving the master's role in its group; send to the new master")
            await self._stop_services()
            cut = await asyncio.to_thread(self._store.become_slave, master_ha_address, epochs)
            self._role_changed()
            return cut

    def fence(self, reason: str | None) -> None:
        """Refuse writes with `reason` at once (the lease in etcd is lost), or take them again (None)."""
        self._store.fence(reason)

    def set_in_sync(self, broker_ids: frozenset[int]) -> None:
        """The slaves of the SyncStateSet a SYNC master waits for (by broker id)."""
        self._store.replication.set_in_sync(broker_ids)

    @property
    def port(self) -> int | None:
        """The port a master's slaves connect to, or None (a slave; a master that does not listen)."""
        master = self._store.ha_master
        return master.address[1] if master is not None else None

    def follow_master(self, ha_address: str) -> None:
        """A slave follows the master whose HA port is at `ha_address` (host:port), as the NameServers name it in
        their reply to its registration; unless [ha] master_address fixes it. Nothing on a master."""
        slave = self._store.ha_slave
        if slave is not None and not self._store.config.ha.master_address and ha_address and not self.controlled:
            slave.set_master(ha_address)

    def state(self) -> ReplicationState:
        """The log's end, a master's slaves with their lag, a slave's link to its master."""
        return self._store.replication_state()

    def master_alive(self) -> bool:
        """A master: True. A slave: whether its link to its master is up and the master heard lately."""
        slave = self._store.ha_slave
        return slave is None or slave.master_alive()

    def far_behind(self, topic: str, queue_id: int, queue_offset: int) -> bool:
        """Whether the message at `queue_offset` of a queue lies so far behind the log's end that a slave should
        serve its reader ([store] access_message_in_memory_max_ratio). False when the queue has no message there."""
        entries = self._store.queue_entries(topic, queue_id, queue_offset, 1)
        return bool(entries) and self._store.far_behind(entries[0][0])

    def record_far_behind(self, message: StoredMessage) -> bool:
        """`far_behind` for a message read: whether its record lies that far behind the log's end."""
        return self._store.far_behind(message.commit_log_offset)
