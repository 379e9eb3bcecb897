"""A broker's place in its group's replication (core.store.ha), as the doors ask it: its role, the HA port its
slaves connect to or the master it follows, the state of its links, and whether a read lies so far behind that a
slave should serve it (RocketMQ's suggestPullingFromSlave)."""

from __future__ import annotations

from core.store.config import BrokerRole
from core.store.ha.states import ReplicationState
from core.store.message import StoredMessage
from core.store.message_store import MessageStore


class Replication:
    def __init__(self, store: MessageStore) -> None:
        self._store = store

    @property
    def role(self) -> BrokerRole:
        """ASYNC_MASTER, SYNC_MASTER or SLAVE (the store's, as [broker] broker_role set it)."""
        return self._store.config.role

    @property
    def port(self) -> int | None:
        """The port a master's slaves connect to, or None (a slave; a master that does not listen)."""
        master = self._store.ha_master
        return master.address[1] if master is not None else None

    def follow_master(self, ha_address: str) -> None:
        """A slave follows the master whose HA port is at `ha_address` (host:port), as the NameServers name it in
        their reply to its registration; unless [ha] master_address fixes it. Nothing on a master."""
        slave = self._store.ha_slave
        if slave is not None and not self._store.config.ha.master_address and ha_address:
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
