"""A store's place in its broker group, and how it changes while the store runs (automatic failover): the role
(ASYNC_MASTER, SYNC_MASTER or SLAVE), the master's HA port and slaves (core.store.ha.master) or the slave's link to
its master (core.store.ha.slave), the epochs of its log (core.store.ha.epoch_file), and the fence that stops a
master's writes the moment it may no longer be one.

Without a controller the role is the configuration's for the store's life. Under automatic failover
(HAConfig.controlled) the store opens as a slave that follows nobody and takes no writes, its HA port bound, and
the controller's agent moves it:

- `become_master(epoch)`: the link to the old master is stopped (the log stops growing), the new epoch is written
  to begin at the log's end, the HA port serves slaves, writes are taken.
- `become_slave(master, epochs)`: writes stop first; the slaves are let go; the log is cut to the last point it
  shares with the new master's epochs (a returning master's unacknowledged tail goes, never served again), the
  master's epochs are taken, and the link to it starts.
- `fence(reason)`: writes are refused with `reason` at once (the broker lost its lease in etcd: a new master may be
  elected), and taken again with `fence(None)` while it is still the master.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from core.store.config import BrokerRole, StoreConfig
from core.store.errors import HAPortError
from core.store.ha.epoch_file import EpochFile, consistent_offset
from core.store.ha.master import HAMaster
from core.store.ha.slave import HASlave
from core.store.ha.states import ReplicationState
from core.store.log.commit_log import CommitLog
from core.store.put_result import PutStatus

log = logging.getLogger(__name__)

Entry = tuple[int, int]  # (epoch, start offset)

SLAVE_REFUSAL = (
    "this broker is a slave: it copies its master's log and takes no messages of its own; send to the master of its"
    " broker group"
)
WAITING_REFUSAL = (
    "this broker waits for the controller (etcd) to name its role in its broker group: it takes no messages until it"
    " is elected master; send to the group's master"
)
# Past any log's end: the other log goes on as far as it likes.
_UNBOUNDED = 2**62


class ReplicationRole:
    def __init__(
        self,
        config: StoreConfig,
        commit_log: CommitLog,
        wake_dispatcher: Callable[[], None],
        wait_dispatched: Callable[[], bool],
        refusal_changed: Callable[[], None],
    ) -> None:
        self.config = config
        self.commit_log = commit_log
        self._wake_dispatcher = wake_dispatcher
        self._wait_dispatched = wait_dispatched
        self._refusal_changed = refusal_changed
        self.controlled = config.ha.controlled
        self.role = BrokerRole.SLAVE if self.controlled else config.role
        self.master: HAMaster | None = None
        self.slave: HASlave | None = None
        self.epochs = EpochFile(config.store_dir)
        self.fenced: str | None = None
        self.following: str | None = None  # the master's HA address this slave was last told (under a controller)
        self._port = config.ha.listen_port
        self._changing = threading.Lock()

    # --- lifecycle (the store's open and close) ---

    def bind(self) -> None:
        """At open: load the epochs, and bind the HA port of a master, or of any broker under a controller (it may
        be elected): a port in use stops the open (HAPortError)."""
        self.epochs.load()
        if (self.role is BrokerRole.SLAVE and not self.controlled) or self._port is None:
            return
        self.master = self._new_master()

    def _new_master(self) -> HAMaster:
        config = self.config
        assert self._port is not None
        try:
            master = HAMaster(self.commit_log, config.ha.host, self._port, config.ha)
        except OSError as exc:
            raise HAPortError(config.ha.host, self._port, exc.strerror or str(exc)) from None
        self._port = master.address[1]  # the same port again after a demotion, when it was chosen free
        return master

    def start(self) -> None:
        """At the end of the open: a configured slave follows its master, a configured master serves its slaves.
        Under a controller nothing starts until the agent names the role."""
        if self.controlled:
            return
        if self.role is BrokerRole.SLAVE:
            self.slave = self._new_slave(self.config.ha.master_address or None)
        elif self.master is not None:
            self.master.start()
            log.info("store %s: %s, HA port %s:%d", self.config.store_dir, self.role.value, *self.master.address)

    def _new_slave(self, address: str | None) -> HASlave:
        config = self.config
        slave = HASlave(self.commit_log, self._wake_dispatcher, config.max_message_size + 4096, config.ha, address)
        slave.start()
        return slave

    def close(self) -> None:
        if self.slave is not None:
            self.slave.stop()
            self.slave = None
        if self.master is not None:
            self.master.stop()
            self.master = None

    # --- what the store asks ---

    @property
    def sync_master(self) -> bool:
        return self.role is BrokerRole.SYNC_MASTER

    def refusal(self) -> str | None:
        """Why this broker takes no writes now, as far as its role goes; None when it takes them."""
        if self.fenced is not None:
            return self.fenced
        if self.role is BrokerRole.SLAVE:
            return WAITING_REFUSAL if self.controlled and self.following is None else SLAVE_REFUSAL
        return None

    def data_appended(self, touched: object = None) -> None:
        """A dispatch listener: the log grew; a master's writers to its slaves wake."""
        master = self.master
        if master is not None and self.role is not BrokerRole.SLAVE:
            master.data_appended(touched)

    def state(self) -> ReplicationState:
        serving = self.master is not None and self.role is not BrokerRole.SLAVE
        slaves = self.master.slaves() if serving and self.master is not None else []
        link = self.slave.state() if self.slave is not None else None
        return ReplicationState(self.commit_log.write_pos, slaves, link)

    def _waiting_on(self, end_offset: int) -> HAMaster | PutStatus:
        """The master whose slaves must hold the log up to `end_offset`, or the answer without a wait."""
        master = self.master
        if master is None or not master.slave_ok(end_offset):
            return PutStatus.SLAVE_NOT_AVAILABLE
        if self.controlled and not master.in_sync:
            return PutStatus.PUT_OK  # the master alone is enough (min_in_sync_replicas 1)
        return master

    async def wait(self, end_offset: int) -> PutStatus:
        """A SYNC master's wait for its slaves (the SyncStateSet's under a controller) to hold the log up to
        `end_offset`: PUT_OK, FLUSH_SLAVE_TIMEOUT after slave_timeout_ms, or SLAVE_NOT_AVAILABLE at once."""
        waiting = self._waiting_on(end_offset)
        if isinstance(waiting, PutStatus):
            return waiting
        return PutStatus.PUT_OK if await waiting.replicated(end_offset) else PutStatus.FLUSH_SLAVE_TIMEOUT

    def wait_blocking(self, end_offset: int) -> PutStatus:
        waiting = self._waiting_on(end_offset)
        if isinstance(waiting, PutStatus):
            return waiting
        return PutStatus.PUT_OK if waiting.replicated_blocking(end_offset) else PutStatus.FLUSH_SLAVE_TIMEOUT

    # --- changes (under a controller; blocking: call them off the event loop) ---

    def stop_following(self) -> int:
        """Stop the link to the master (a candidate in an election): the log's end, which no longer grows."""
        with self._changing:
            if self.slave is not None:
                self.slave.stop()
                self.slave = None
            self.following = None
            self._refusal_changed()
            self._wait_dispatched()
            return self.commit_log.write_pos

    def become_master(self, epoch: int, sync: bool) -> int:
        """Take writes as the master of `epoch` (SYNC_MASTER if `sync`): return the offset the epoch begins at, the
        log's end once the link to the old master is stopped and its records dispatched."""
        with self._changing:
            if self.slave is not None:
                self.slave.stop()
                self.slave = None
            self.following = None
            self._wait_dispatched()
            start = self.commit_log.write_pos
            last = self.epochs.last()
            if last is None or last[0] < epoch:
                self.epochs.append(epoch, start)
            elif last[0] > epoch:
                raise ValueError(f"epoch {epoch} is older than this log's last, {last[0]}")
            if self.master is None or self.master.stopped:
                self.master = self._new_master()
            self.master.set_in_sync(frozenset())
            if not self.master.started:
                self.master.start()
            self.role = BrokerRole.SYNC_MASTER if sync else BrokerRole.ASYNC_MASTER
            self.fenced = None
            self._refusal_changed()
            log.info("store %s: master of epoch %d from commit-log offset %d, %s, HA port %s:%d",
                     self.config.store_dir, epoch, start, self.role.value, *self.master.address)  # fmt: skip
            return start

    def become_slave(self, master_address: str, epochs: Sequence[Entry], truncate: Callable[[int], int]) -> int:
        """Follow the master whose HA port is at `master_address`, whose log has `epochs`: writes stop, the log is
        cut (`truncate`) to the last point it shares with the master's, the master's epochs are taken, and the link
        starts. Returns the number of bytes cut."""
        with self._changing:
            self.role = BrokerRole.SLAVE
            self._refusal_changed()
            if self.master is not None and self.master.started:
                self.master.stop()  # its slaves follow the new master; its waiting writers time out
            if self.slave is not None:
                self.slave.stop()
                self.slave = None
            self._wait_dispatched()
            end = self.commit_log.write_pos
            ours, theirs = [(0, 0), *self.epochs.entries], [(0, 0), *epochs]
            point = consistent_offset(ours, end, theirs, _UNBOUNDED)
            cut = truncate(point) if 0 <= point < end else 0
            if cut:
                log.warning("store %s: %d bytes past commit-log offset %d cut: the new master's log does not"
                            " hold them", self.config.store_dir, cut, point)  # fmt: skip
            self.epochs.replace(epochs)
            self.following = master_address
            self.fenced = None
            self._refusal_changed()
            self.slave = self._new_slave(master_address)
            return cut

    def fence(self, reason: str | None) -> None:
        """Refuse writes with `reason` (the lease is lost), or take them again (None)."""
        if reason != self.fenced:
            self.fenced = reason
            self._refusal_changed()
            if reason is not None:
                log.warning("store %s: writes refused: %s", self.config.store_dir, reason)

    def set_in_sync(self, broker_ids: frozenset[int]) -> None:
        """The slaves of the SyncStateSet a SYNC master waits for."""
        if self.master is not None:
            self.master.set_in_sync(broker_ids)
