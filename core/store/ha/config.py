"""Settings of replication (`[ha]` of mqgate's configuration), with RocketMQ's names and defaults (its
MessageStoreConfig's haListenPort, haMasterAddress, haSendHeartbeatInterval, haHousekeepingInterval,
haTransferBatchSize, haMaxGapNotInSync, and RocketMQ 5's slaveTimeout)."""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1024 * 1024


@dataclass(slots=True, frozen=True)
class HAConfig:
    # Where a master listens for its slaves: None does not listen (a store embedded in a program); `mqgate serve`
    # listens on the remoting port + 1, as RocketMQ (0: a free port).
    listen_port: int | None = None
    host: str = "0.0.0.0"
    # The master's HA address (host:port) for a slave; empty: learned from the NameServers' reply to registration.
    master_address: str = ""
    # A slave reports how far its log reaches at least this often; the master sends a heartbeat frame when it has
    # sent nothing for as long.
    send_heartbeat_interval_ms: int = 5000
    # A link silent this long is dropped (the slave connects again).
    housekeeping_interval_ms: int = 20_000
    # At most this much of the log a frame.
    transfer_batch_size: int = 32 * 1024
    # A SYNC_MASTER waits only for a slave at most this far behind; else SLAVE_NOT_AVAILABLE at once.
    max_gap_not_in_sync: int = 256 * MiB
    # A SYNC_MASTER's send that no slave holds within this answers FLUSH_SLAVE_TIMEOUT.
    slave_timeout_ms: int = 3000
    # Under automatic failover (mqgate's [controller]) the controller names the role: the store opens as a slave
    # with no master, and a slave says who it is (`broker_id`) when it connects. A SYNC master then waits for every
    # member of the SyncStateSet, and refuses a send at once while the set counts fewer than
    # `min_in_sync_replicas` brokers, itself included (RocketMQ's minInSyncReplicas).
    controlled: bool = False
    broker_id: int = 0
    min_in_sync_replicas: int = 2

    def __post_init__(self) -> None:
        if self.listen_port is not None and not 0 <= self.listen_port <= 65535:
            raise ValueError(f"listen_port {self.listen_port}: give 0 (a free port) to 65535")
        for name in ("send_heartbeat_interval_ms", "housekeeping_interval_ms", "slave_timeout_ms"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be 1 or more, not {getattr(self, name)}")
        if self.transfer_batch_size < 1024:
            raise ValueError(f"transfer_batch_size {self.transfer_batch_size}: give 1024 bytes or more")
        if self.max_gap_not_in_sync < 1:
            raise ValueError(f"max_gap_not_in_sync {self.max_gap_not_in_sync}: give 1 byte or more")
        if self.min_in_sync_replicas < 1:
            raise ValueError(f"min_in_sync_replicas {self.min_in_sync_replicas}: give 1 (the master alone) or more")
        if self.master_address and not self.master_address.rpartition(":")[2].isdigit():
            raise ValueError(f"master_address {self.master_address!r}: give host:port")

    @property
    def heartbeat_interval_s(self) -> float:
        return self.send_heartbeat_interval_ms / 1000

    @property
    def housekeeping_interval_s(self) -> float:
        return self.housekeeping_interval_ms / 1000

    @property
    def slave_timeout_s(self) -> float:
        return self.slave_timeout_ms / 1000
