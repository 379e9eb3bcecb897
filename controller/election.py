"""The controller's rules (RocketMQ 5's controller: DefaultElectPolicy and the SyncStateSet's updates), free of I/O.

A broker group's record holds its master (id and address), the master epoch (raised by each election, never
otherwise) and the SyncStateSet: the brokers that hold everything the master confirmed, with a version of its own.

- Election (`elect`): when the master's lease is gone, the alive members of the SyncStateSet are candidates; the
  one with the highest epoch, then the longest log (then the lowest id, so that the choice is the same wherever it is
  made) becomes master with epoch + 1, and the set becomes that broker alone (the others join again as they catch
  up). With no alive member and `allow_unclean` (RocketMQ's enableElectUncleanMaster), any alive broker may be
  chosen, and the result says so: what the old set held past that broker's log is lost.
- The set (`next_sync_state_set`): the master is always in it; a slave joins once its log reaches the master's
  confirmed offset (what every member holds), and leaves once it has not caught up with the master for
  `max_not_caught_up_s` (RocketMQ's haMaxTimeSlaveNotCatchup, 15 s).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MAX_NOT_CAUGHT_UP_S = 15.0
# The record keeps the group's latest epochs only: a broker that missed more elections than this shares no epoch
# with the master but the oldest kept, and is cut back to where that one begins.
MAX_EPOCHS = 64


@dataclass(frozen=True, slots=True)
class Replica:
    """A broker of the group as it reports itself: its id, remoting address, last epoch and log end, and the
    address of its HA port (where its slaves connect if it is elected)."""

    broker_id: int
    address: str
    epoch: int
    max_offset: int
    ha_address: str = ""


@dataclass(frozen=True, slots=True)
class GroupRecord:
    master_id: int | None
    master_address: str
    master_epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int
    master_ha_address: str = ""
    # The group's epochs, (epoch, commit-log offset it begins at), oldest first: what a returning broker compares
    # its own with to know how much of its log it shares with the master's (core.store.ha.epoch_file).
    epochs: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class Election:
    record: GroupRecord
    unclean: bool  # chosen from outside the SyncStateSet: messages only the old set held may be lost


def elect(record: GroupRecord, alive: Mapping[int, Replica], allow_unclean: bool = False) -> Election | None:
    """The group's next record once its master is gone, or None when no broker may become master."""
    candidates = [replica for broker_id, replica in alive.items() if broker_id in record.sync_state_set]
    unclean = False
    if not candidates and allow_unclean:
        candidates, unclean = list(alive.values()), True
    if not candidates:
        return None
    best = max(candidates, key=lambda replica: (replica.epoch, replica.max_offset, -replica.broker_id))
    epoch = record.master_epoch + 1
    new = GroupRecord(
        best.broker_id, best.address, epoch, frozenset({best.broker_id}), record.sync_state_set_epoch + 1,
        best.ha_address, (*record.epochs[-MAX_EPOCHS + 1 :], (epoch, best.max_offset)),
    )  # fmt: skip
    return Election(new, unclean)


def next_sync_state_set(
    current: frozenset[int],
    master_id: int,
    confirm_offset: int,
    acked: Mapping[int, int],
    caught_up_at: Mapping[int, float],
    now: float,
    max_not_caught_up_s: float = MAX_NOT_CAUGHT_UP_S,
) -> frozenset[int]:
    """The set after a look at the slaves: `acked`, each connected slave's log end; `caught_up_at`, when each last
    held the master's whole log."""
    members = {master_id}
    for broker_id, offset in acked.items():
        if broker_id == master_id:
            continue
        if broker_id in current:
            if now - caught_up_at.get(broker_id, float("-inf")) <= max_not_caught_up_s:
                members.add(broker_id)
        elif offset >= confirm_offset:
            members.add(broker_id)
    return frozenset(members)
