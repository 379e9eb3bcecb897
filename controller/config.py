"""Settings of automatic failover (`[controller]` of mqgate's configuration), with RocketMQ 5's names where it has
them (its BrokerConfig's enableControllerMode, its ControllerConfig's enableElectUncleanMaster, its
MessageStoreConfig's haMaxTimeSlaveNotCatchup)."""

from __future__ import annotations

from dataclasses import dataclass

from controller.election import MAX_NOT_CAUGHT_UP_S

# etcd refuses leases shorter than about its election timeout; below 2 s a busy machine's pauses fence a healthy
# master.
MIN_LEASE_TTL_S = 2.0


@dataclass(slots=True, frozen=True)
class ControllerConfig:
    # The etcd cluster that decides each broker group's master (HOST:PORT;HOST:PORT); empty: no automatic failover.
    etcd_endpoints: tuple[str, ...] = ()
    # A broker's heartbeat is a lease this long: a master whose lease is not refreshed stops taking writes before it
    # ends, and its group elects a new master once it has (RocketMQ's controller: a 10 s heartbeat timeout).
    lease_ttl_s: float = 5.0
    # With no member of the SyncStateSet alive, elect another broker anyway: what only the set held is lost.
    enable_elect_unclean_master: bool = False
    # A slave that has not caught up with its master for this long leaves the SyncStateSet.
    ha_max_time_slave_not_catchup_ms: int = int(MAX_NOT_CAUGHT_UP_S * 1000)

    def __post_init__(self) -> None:
        if self.lease_ttl_s < MIN_LEASE_TTL_S:
            raise ValueError(f"lease_ttl_s {self.lease_ttl_s:g}: give {MIN_LEASE_TTL_S:g} s or more")
        if self.ha_max_time_slave_not_catchup_ms < 1000:
            raise ValueError(
                f"ha_max_time_slave_not_catchup_ms {self.ha_max_time_slave_not_catchup_ms}: give 1000 or more"
            )

    @property
    def enabled(self) -> bool:
        return bool(self.etcd_endpoints)
