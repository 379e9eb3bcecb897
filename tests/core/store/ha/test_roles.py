"""Stores under automatic failover (HAConfig.controlled), open in this process and linked over loopback, moved
between roles as the controller's agent moves them: writes wait for the controller, a new master's epoch, the
fence, the SyncStateSet's waits, and a returning master's unacknowledged tail cut (never served again, not even
after a crash)."""

import asyncio
import shutil

import pytest

from core.store.config import BrokerRole
from core.store.errors import StoreNotWritableError
from core.store.ha.config import HAConfig
from core.store.ha.role import WAITING_REFUSAL
from core.store.message_store import MessageStore, PutStatus
from tests.core.store.conftest import small_config
from tests.core.store.ha.test_replication import FAST, eventually, msg, same_queues

QUEUES = (0, 1, 2)


def controlled(open_store, tmp_path, name, broker_id, role=BrokerRole.ASYNC_MASTER, min_in_sync=2, **overrides):
    settings = HAConfig(**{**FAST, "host": "127.0.0.1", "listen_port": 0, "controlled": True,
                           "broker_id": broker_id, "min_in_sync_replicas": min_in_sync})  # fmt: skip
    return open_store(tmp_path / name, role=role, ha=settings, **overrides)


def ha_address(store):
    host, port = store.replication.master.address
    return f"{host}:{port}"


def caught_up(master, slave):
    return (
        slave.end_offset == master.end_offset
        and master.wait_dispatched(timeout=0.1)
        and slave.wait_dispatched(timeout=0.1)
    )


def test_a_controlled_store_takes_no_writes_until_it_is_made_master(open_store, tmp_path):
    store = controlled(open_store, tmp_path, "a", 1)
    assert store.replication.role is BrokerRole.SLAVE
    with pytest.raises(StoreNotWritableError, match="waits for the controller"):
        store.append(msg(0))
    assert WAITING_REFUSAL in store.appender.refusal
    assert store.become_master(1, sync=False) == 0
    store.append(msg(1))
    assert store.replication.epochs.entries == [(1, 0)]
    store.fence("this broker lost its lease in etcd")
    with pytest.raises(StoreNotWritableError, match="lost its lease"):
        store.append(msg(2))
    store.fence(None)
    store.append(msg(3))


def test_the_epochs_survive_a_restart_and_a_new_epoch_begins_at_the_end(open_store, tmp_path):
    store = controlled(open_store, tmp_path, "a", 1)
    store.become_master(3, sync=False)
    for n in range(20):
        store.append(msg(n))
    end = store.end_offset
    store.close()
    again = controlled(open_store, tmp_path, "a", 1)
    assert again.replication.epochs.entries == [(3, 0)]
    assert again.become_master(4, sync=False) == end
    assert again.replication.epochs.entries == [(3, 0), (4, end)]


def test_a_returning_master_cuts_its_unacknowledged_tail_and_follows_the_new_one(open_store, tmp_path):
    a = controlled(open_store, tmp_path, "a", 1)
    b = controlled(open_store, tmp_path, "b", 2)
    a.become_master(1, sync=False)
    b.become_slave(ha_address(a), a.replication.epochs.entries)
    for n in range(600):
        a.append(msg(n, queue_id=n % 3, KEYS=f"key{n}", UNIQ_KEY=f"id{n}"))
    eventually(lambda: caught_up(a, b))
    shared = a.end_offset

    # b is elected; a, cut off, still appends what no slave acknowledges.
    assert b.become_master(2, sync=False) == shared
    for n in range(600, 900):
        a.append(msg(n, queue_id=n % 3, KEYS=f"lost{n}", UNIQ_KEY=f"lost-id{n}"))
    for n in range(900, 1000):
        b.append(msg(n, queue_id=n % 3, KEYS=f"key{n}", UNIQ_KEY=f"id{n}"))
    assert a.end_offset > shared

    cut = a.become_slave(ha_address(b), b.replication.epochs.entries)
    assert cut > 0
    assert a.replication.epochs.entries == [(1, 0), (2, shared)]
    eventually(lambda: caught_up(b, a))
    same_queues(b, a, queues=QUEUES)
    assert a.query_messages("orders", "lost700") == []
    assert [m.body for m in a.query_messages("orders", "key950")] == [msg(950).body]
    assert [m.body for m in a.query_messages("orders", "key10")] == [msg(10).body]
    with pytest.raises(StoreNotWritableError, match="slave"):
        a.append(msg(0))


@pytest.mark.parametrize("index_process", [False, True])
def test_a_cut_tail_stays_cut_after_a_crash_and_the_index_finds_the_new_records(open_store, tmp_path, index_process):
    a = controlled(open_store, tmp_path, "a", 1, index_process=index_process)
    b = controlled(open_store, tmp_path, "b", 2)
    a.become_master(1, sync=False)
    b.become_slave(ha_address(a), a.replication.epochs.entries)
    for n in range(200):
        a.append(msg(n, KEYS=f"key{n}"))
    eventually(lambda: caught_up(a, b))
    b.become_master(2, sync=False)
    for n in range(200, 500):
        a.append(msg(n, KEYS=f"lost{n}"))
    a.wait_dispatched()
    a.flush()
    for n in range(500, 520):
        b.append(msg(n, KEYS=f"key{n}"))
    a.become_slave(ha_address(b), b.replication.epochs.entries)
    eventually(lambda: caught_up(b, a))
    assert [m.body for m in a.query_messages("orders", "key510")] == [msg(510).body]

    # A crash now: the files as they are, the abort marker left. The cut tail was zeroed and synced: recovery
    # scans into zeros, not into the old records.
    crashed = tmp_path / "crashed"
    a.flush()
    shutil.copytree(tmp_path / "a", crashed, ignore=shutil.ignore_patterns("lock"))
    assert (crashed / "abort").exists()
    reopened = MessageStore(small_config(crashed, role=BrokerRole.SLAVE))
    reopened.open()
    try:
        assert reopened.end_offset == b.end_offset
        same_queues(b, reopened, queues=(0,))
        assert reopened.query_messages("orders", "lost300") == []
    finally:
        reopened.close()


def test_a_sync_master_waits_for_every_member_of_the_sync_state_set(open_store, tmp_path):
    a = controlled(open_store, tmp_path, "a", 1, role=BrokerRole.SYNC_MASTER, min_in_sync=2)
    b = controlled(open_store, tmp_path, "b", 2)
    a.become_master(1, sync=True)
    b.become_slave(ha_address(a), a.replication.epochs.entries)

    async def put(n):
        return (await a.put(msg(n))).status

    # Alone in the set, with two needed: refused at once.
    assert asyncio.run(put(0)) is PutStatus.SLAVE_NOT_AVAILABLE
    a.replication.set_in_sync(frozenset({2}))
    assert asyncio.run(put(1)) is PutStatus.PUT_OK
    assert b.end_offset >= a.end_offset
    # A member that is not connected holds every writer back until it times out.
    a.replication.set_in_sync(frozenset({2, 3}))
    assert asyncio.run(put(2)) is PutStatus.FLUSH_SLAVE_TIMEOUT
    states = {state.broker_id: state for state in a.replication_state().slaves}
    assert set(states) == {2}


def test_a_master_alone_in_the_set_acknowledges_when_one_replica_is_enough(open_store, tmp_path):
    a = controlled(open_store, tmp_path, "a", 1, role=BrokerRole.SYNC_MASTER, min_in_sync=1)
    a.become_master(1, sync=True)
    result = asyncio.run(a.put(msg(0)))
    assert result.status is PutStatus.PUT_OK
