"""A master's store and a slave's, each open in this process, linked over a real socket on loopback."""

import asyncio
import socket
import time

import pytest

from core.store.config import BrokerRole
from core.store.ha.config import HAConfig
from core.store.ha.frames import REPORT, encode_header
from core.store.message import Message
from core.store.message_store import GetStatus, PutStatus

FAST = {"send_heartbeat_interval_ms": 200, "housekeeping_interval_ms": 2000, "slave_timeout_ms": 1000}


def ha(**values):
    return {"ha": HAConfig(**{**FAST, **values})}


def msg(n, queue_id=0, **props):
    body = f"m{n}".encode().ljust(100 + (n % 50) * 20, b".")
    return Message(topic="orders", body=body, queue_id=queue_id, properties=dict(props))


def eventually(check, timeout=15.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.02)


def ha_address(store):
    host, port = store.ha_master.address
    return f"{host}:{port}"


def master_and_slave(open_store, tmp_path, role=BrokerRole.ASYNC_MASTER, **overrides):
    master = open_store(tmp_path / "master", role=role, **ha(host="127.0.0.1", listen_port=0), **overrides)
    address = ha_address(master)
    slave = open_store(tmp_path / "slave", role=BrokerRole.SLAVE, **ha(master_address=address), **overrides)
    # Linked before the test appends: a slave that first reports 0 once the master has gone past its first segment
    # starts from the master's last segment (RocketMQ's rule), and its queues would begin later than the master's.
    eventually(lambda: bool(master.ha_master.slaves()))
    return master, slave


def caught_up(master, slave) -> bool:
    """The slave holds the master's whole log, and each has dispatched its own (the master's queues may lag the
    bytes it already sent: the link sends what is committed, the dispatcher follows)."""
    return (
        slave.end_offset == master.end_offset
        and master.wait_dispatched(timeout=0.1)
        and slave.wait_dispatched(timeout=0.1)
    )


def same_queues(master, slave, topic="orders", queues=(0, 1, 2)):
    for queue_id in queues:
        ours = master.get_messages(topic, queue_id, 0, max_count=10_000, max_bytes=2**30)
        theirs = slave.get_messages(topic, queue_id, 0, max_count=10_000, max_bytes=2**30)
        assert ours.status == theirs.status
        assert [(m.queue_offset, m.commit_log_offset, m.body, m.unique_id) for m in ours.messages] == [
            (m.queue_offset, m.commit_log_offset, m.body, m.unique_id) for m in theirs.messages
        ]


def test_the_slave_copies_the_log_and_builds_the_same_queues_and_index(open_store, tmp_path):
    master, slave = master_and_slave(open_store, tmp_path)
    for n in range(3000):  # over several segments: fillers cross too
        master.append(msg(n, queue_id=n % 3, KEYS=f"key{n}", UNIQ_KEY=f"id{n}"))
    eventually(lambda: caught_up(master, slave))
    assert master.commit_log.min_offset == 0 and len(slave.commit_log.files.files) > 1
    same_queues(master, slave)
    assert [m.body for m in slave.query_messages("orders", "key2999")] == [msg(2999).body]
    states = master.ha_master.slaves()
    assert len(states) == 1 and states[0].lag_bytes == 0 and states[0].in_sync
    assert slave.ha_slave.master_alive()


def test_a_slave_writes_nothing_of_its_own(open_store, tmp_path):
    _, slave = master_and_slave(open_store, tmp_path)
    from core.store.errors import StoreNotWritableError

    with pytest.raises(StoreNotWritableError, match="slave"):
        slave.append(msg(1))


def test_a_stopped_slave_catches_up_when_it_returns(open_store, tmp_path):
    master, slave = master_and_slave(open_store, tmp_path)
    for n in range(200):
        master.append(msg(n, queue_id=n % 3))
    eventually(lambda: slave.end_offset == master.end_offset)
    slave.close()
    for n in range(200, 2000):
        master.append(msg(n, queue_id=n % 3))
    slave = open_store(tmp_path / "slave", role=BrokerRole.SLAVE,
                       **ha(master_address=ha_address(master)))  # fmt: skip
    eventually(lambda: caught_up(master, slave))
    same_queues(master, slave)


def test_a_new_slave_starts_with_the_masters_last_segment(open_store, tmp_path):
    master = open_store(tmp_path / "master", **ha(host="127.0.0.1", listen_port=0))
    for n in range(3000):
        master.append(msg(n, queue_id=n % 3))
    last = master.commit_log.files.files[-1].base
    assert last > 0
    slave = open_store(tmp_path / "slave", role=BrokerRole.SLAVE,
                       **ha(master_address=ha_address(master)))  # fmt: skip
    eventually(lambda: caught_up(master, slave))
    assert slave.commit_log.min_offset == last
    ours = master.get_messages("orders", 0, 0, max_count=10_000, max_bytes=2**30).messages
    theirs = slave.get_messages("orders", 0, 0, max_count=10_000, max_bytes=2**30)
    assert theirs.status in (GetStatus.FOUND, GetStatus.OFFSET_TOO_SMALL)
    kept = [m for m in ours if m.commit_log_offset >= last]
    got = slave.get_messages("orders", 0, kept[0].queue_offset, max_count=10_000, max_bytes=2**30).messages
    assert [(m.queue_offset, m.body) for m in got] == [(m.queue_offset, m.body) for m in kept]


def test_sync_master_answers_once_a_slave_holds_the_record(open_store, tmp_path):
    master, slave = master_and_slave(open_store, tmp_path, role=BrokerRole.SYNC_MASTER)
    eventually(lambda: master.ha_master.best_acked() >= 0)

    async def sends():
        return [await master.put(msg(n)) for n in range(50)]

    results = asyncio.run(sends())
    assert {r.status for r in results} == {PutStatus.PUT_OK}
    # Acknowledged means the slave holds it: every acknowledged record is below the slave's end already.
    assert slave.end_offset >= results[-1].end_offset


def test_sync_master_without_a_slave_says_so_at_once(open_store, tmp_path):
    master = open_store(tmp_path / "master", role=BrokerRole.SYNC_MASTER, **ha(host="127.0.0.1", listen_port=0))
    result = asyncio.run(master.put(msg(1)))
    # Answered without waiting for a slave: SLAVE_NOT_AVAILABLE comes only from the check made before any wait.
    assert result.status is PutStatus.SLAVE_NOT_AVAILABLE
    assert master.wait_dispatched()  # stored on the master only: in its log all the same
    assert master.get_messages("orders", 0, 0).status is GetStatus.FOUND


def test_sync_master_times_out_when_the_slave_does_not_answer(open_store, tmp_path):
    """A peer that connects and reports, then goes silent (as a slave behind a cut link): FLUSH_SLAVE_TIMEOUT."""
    master = open_store(tmp_path / "master", role=BrokerRole.SYNC_MASTER, **ha(host="127.0.0.1", listen_port=0))
    silent = socket.create_connection(master.ha_master.address)
    try:
        silent.sendall(REPORT.pack(0))
        eventually(lambda: master.ha_master.best_acked() >= 0)
        started = time.monotonic()
        result = asyncio.run(master.put(msg(1)))
        assert result.status is PutStatus.FLUSH_SLAVE_TIMEOUT
        assert time.monotonic() - started >= 0.9  # it waited out slave_timeout_ms
    finally:
        silent.close()


def test_a_slave_refuses_a_log_that_does_not_continue_its_own(open_store, tmp_path):
    """A peer posing as master sends a record at the slave's end that is not where it says: nothing is kept."""
    master = open_store(tmp_path / "master")
    for n in range(5):
        master.append(msg(n))
    master.commit_log.commit()
    mapped = master.commit_log.files.files[0]
    record = bytes(mapped.view[0 : master.end_offset])
    fake = socket.create_server(("127.0.0.1", 0))
    slave = open_store(tmp_path / "slave", role=BrokerRole.SLAVE,
                       **ha(master_address=f"127.0.0.1:{fake.getsockname()[1]}"))  # fmt: skip
    connection, _ = fake.accept()
    try:
        assert connection.recv(8) == REPORT.pack(0)
        connection.sendall(encode_header(4096, len(record)) + record)  # not where this log (empty) can start
        eventually(lambda: slave.ha_slave.refused is not None)
        assert "does not continue this log" in slave.ha_slave.refused
        assert slave.end_offset == 0
    finally:
        connection.close()
        fake.close()


def test_a_master_refuses_a_slave_whose_log_is_longer(open_store, tmp_path):
    master, slave = master_and_slave(open_store, tmp_path)
    for n in range(100):
        master.append(msg(n))
    eventually(lambda: slave.end_offset == master.end_offset)
    slave.close()
    other = open_store(tmp_path / "other", **ha(host="127.0.0.1", listen_port=0))  # a master with a shorter log
    other.append(msg(0))
    slave = open_store(tmp_path / "slave", role=BrokerRole.SLAVE,
                       **ha(master_address=ha_address(other)))  # fmt: skip
    time.sleep(1)
    assert other.ha_master.slaves() == [] and slave.end_offset == master.end_offset


def test_a_slave_refuses_a_master_whose_log_is_another(open_store, tmp_path):
    """A slave of one master pointed at another whose log is longer: the bytes before its end differ."""
    master, slave = master_and_slave(open_store, tmp_path)
    for n in range(100):
        master.append(msg(n))
    eventually(lambda: slave.end_offset == master.end_offset)
    end = slave.end_offset
    slave.close()
    other = open_store(tmp_path / "other", **ha(host="127.0.0.1", listen_port=0))
    for n in range(300):
        other.append(msg(n + 7, queue_id=1))
    slave = open_store(tmp_path / "slave", role=BrokerRole.SLAVE, **ha(master_address=ha_address(other)))
    eventually(lambda: slave.ha_slave.refused is not None)
    assert "differs from this one" in slave.ha_slave.refused
    assert slave.end_offset == end
