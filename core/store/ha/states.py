"""What replication looks like from a store, for the admin's `cluster list`, GET_BROKER_HA_STATUS and /metrics."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, frozen=True)
class SlaveState:
    """One connected slave, as the master sees it (for the admin's `cluster list` and /metrics)."""

    address: str
    acked_offset: int  # how far the slave's log reaches, by its last report
    lag_bytes: int  # the master's log end minus that
    lag_s: float  # how long ago the oldest record the slave lacks was stored (0 when it lacks none)
    in_sync: bool  # within max_gap_not_in_sync of the master's log end
    broker_id: int | None = None  # the id the slave said in its hello (under automatic failover)


@dataclass(slots=True, frozen=True)
class MasterState:
    """The link to the master, as this slave sees it."""

    address: str | None
    connected: bool
    last_heard_s: float | None  # seconds since the master last sent anything
    refused: str | None  # why the last data was refused, if it was
    local_address: str | None = None  # host:port the link comes from (how the master names this slave)


@dataclass(slots=True, frozen=True)
class ReplicationState:
    """What a store says of its replication (MessageStore.replication_state)."""

    log_end: int
    slaves: list[SlaveState]  # a master's connected slaves
    master: MasterState | None  # a slave's link to its master
