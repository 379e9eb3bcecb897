"""The controller's rules against plain statements of them (hypothesis): an election picks a live member of the
SyncStateSet with the highest epoch and then the longest log, raises the epoch by one and leaves the set to the new
master alone; unclean only when allowed and needed; the set keeps its master, takes slaves that caught up and drops
those behind for too long."""

from hypothesis import given
from hypothesis import strategies as st

from controller.election import GroupRecord, Replica, elect, next_sync_state_set

replicas = st.dictionaries(
    st.integers(0, 5),
    st.tuples(st.integers(0, 4), st.integers(0, 1000)),
    max_size=6,
).map(lambda d: {i: Replica(i, f"10.0.0.{i}:10911", epoch, offset) for i, (epoch, offset) in d.items()})
sets = st.frozensets(st.integers(0, 5), max_size=6)


@given(replicas, sets, st.integers(0, 9), st.booleans())
def test_an_election(alive, sync_set, epoch, allow_unclean):
    record = GroupRecord(0, "10.0.0.0:10911", epoch, sync_set, 3)
    result = elect(record, alive, allow_unclean)
    members = [r for i, r in alive.items() if i in sync_set]
    if not members and not (allow_unclean and alive):
        assert result is None
        return
    assert result is not None
    pool = members or list(alive.values())
    assert result.unclean == (not members)
    best = max((r.epoch, r.max_offset) for r in pool)
    winner = alive[result.record.master_id]
    assert winner in pool and (winner.epoch, winner.max_offset) == best
    assert winner.broker_id == min(r.broker_id for r in pool if (r.epoch, r.max_offset) == best)
    assert result.record.master_epoch == epoch + 1 and result.record.sync_state_set == {winner.broker_id}
    assert result.record.sync_state_set_epoch == 4 and result.record.master_address == winner.address


@given(
    sets,
    st.dictionaries(st.integers(1, 5), st.integers(0, 100), max_size=5),
    st.dictionaries(st.integers(1, 5), st.floats(0, 100), max_size=5),
    st.integers(0, 100),
)
def test_the_sync_state_set(current, acked, caught_up_at, confirm):
    now = 100.0
    result = next_sync_state_set(current, 0, confirm, acked, caught_up_at, now, 15.0)
    assert 0 in result
    for broker_id, offset in acked.items():
        if broker_id in current:
            fresh = now - caught_up_at.get(broker_id, float("-inf")) <= 15.0
            assert (broker_id in result) == fresh
        else:
            assert (broker_id in result) == (offset >= confirm)
    assert result <= {0} | set(acked)
