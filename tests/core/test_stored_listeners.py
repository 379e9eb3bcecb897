"""Stored listeners: every message appended is heard once, in store order, with its result, before its send returns;
refused messages are never heard."""

import asyncio
import logging

import pytest

from core import (
    FlushMode,
    IllegalMessageError,
    Message,
    NoPermissionError,
    Perm,
    Producer,
    SendResult,
    SendStatus,
    ServiceNotAvailableError,
)
from core.store.message_store import PutStatus


class Ear:
    """A stored listener that records what it hears."""

    def __init__(self) -> None:
        self.heard: list[tuple[Message, SendResult]] = []

    def __call__(self, message: Message, result: SendResult) -> None:
        self.heard.append((message, result))

    @property
    def bodies(self) -> list[bytes]:
        return [message.body for message, _ in self.heard]

    @property
    def results(self) -> list[SendResult]:
        return [result for _, result in self.heard]


async def test_sends_and_batches_are_heard_once_with_the_results_their_senders_get(make_broker):
    broker = await make_broker()
    ear = Ear()
    broker.add_stored_listener(ear)
    one = Message(topic="t", body=b"one")
    result = await broker.send(one)
    assert ear.heard == [(one, result)] and ear.heard[0][1] is result
    batch = [Message(topic="t", body=b"two"), Message(topic="t", body=b"three")]
    results = await broker.send_batch(batch)
    by_producer = await Producer(broker).send("u", b"four", tags="x")
    assert ear.bodies == [b"one", b"two", b"three", b"four"]
    assert ear.results == [result, *results, by_producer]
    assert all(r.status is SendStatus.SEND_OK for r in ear.results)
    assert [message for message, _ in ear.heard[1:3]] == batch
    offsets = [r.commit_log_offset for r in ear.results]
    assert offsets == sorted(offsets) and len(set(offsets)) == 4  # store order


async def test_each_sender_finds_its_messages_heard_when_its_send_returns(make_broker):
    broker = await make_broker()
    ear = Ear()
    broker.add_stored_listener(ear)

    async def send(n: int) -> None:
        if n % 3:
            result = await broker.send(Message(topic="t", body=b"%d" % n, queue_id=n % 4))
            assert result in ear.results
        else:
            batch = [Message(topic="t", body=b"%d.%d" % (n, k), queue_id=n % 4) for k in range(3)]
            for result in await broker.send_batch(batch):
                assert result in ear.results

    await asyncio.gather(*(send(n) for n in range(30)))
    assert len(ear.heard) == 20 + 10 * 3


async def test_concurrent_senders_under_sync_flush_are_heard_in_store_order(make_broker):
    broker = await make_broker(flush_mode=FlushMode.SYNC_FLUSH)
    ear = Ear()
    broker.add_stored_listener(ear)
    returned: list[SendResult] = []

    async def send(n: int) -> None:
        if n % 4:
            results = [await broker.send(Message(topic="t", body=b"%d" % n))]
        else:
            results = await broker.send_batch([Message(topic="t", body=b"%d.%d" % (n, k)) for k in range(4)])
        assert all(result in ear.results for result in results)  # heard before the send returned
        returned.extend(results)

    await asyncio.gather(*(send(n) for n in range(40)))
    offsets = [r.commit_log_offset for r in ear.results]
    assert offsets == sorted(offsets)
    assert sorted(offsets) == sorted(r.commit_log_offset for r in returned) and len(offsets) == 30 + 10 * 4
    assert all(r.status is SendStatus.SEND_OK for r in ear.results)


async def test_refused_messages_are_not_heard(make_broker, tmp_path):
    broker = await make_broker()
    ear = Ear()
    broker.add_stored_listener(ear)
    broker.create_topic("read-only", perm=Perm.READ)
    with pytest.raises(NoPermissionError, match="not writable"):
        await broker.send(Message(topic="read-only", body=b"refused by the route"))
    with pytest.raises(NoPermissionError):
        await broker.send_batch([Message(topic="read-only", body=b"x"), Message(topic="read-only", body=b"y")])
    with pytest.raises(IllegalMessageError, match="does not exist"):
        await broker.send(Message(topic="t", body=b"no such queue", queue_id=99))
    with pytest.raises(IllegalMessageError):
        await broker.send(Message(topic="t", body=b"bad property", properties={"a": "\x01"}))

    def refuse(message: Message) -> None:
        if message.body == b"hooked":
            raise RuntimeError("refused by a hook")

    broker.add_send_hook(refuse)
    with pytest.raises(RuntimeError, match="refused by a hook"):
        await broker.send(Message(topic="t", body=b"hooked"))
    assert ear.heard == []
    stored = await broker.send(Message(topic="t", body=b"stored"))
    assert ear.results == [stored]

    broker.store.close()  # no longer writable: the store refuses, nothing is appended
    with pytest.raises(ServiceNotAvailableError, match="not open"):
        await broker.send(Message(topic="t", body=b"closed"))
    with pytest.raises(ServiceNotAvailableError, match="not open"):
        await broker.send_batch([Message(topic="t", body=b"closed too")])
    assert ear.results == [stored]

    # Writes refused for a full disk (every usage is at or above a refuse ratio this small).
    full = await make_broker(tmp_path / "full", disk_clean_ratio=1e-9, disk_warn_ratio=1e-9, disk_refuse_ratio=1e-9)
    full_ear = Ear()
    full.add_stored_listener(full_ear)
    with pytest.raises(ServiceNotAvailableError, match="disk_refuse_ratio"):
        await full.send(Message(topic="t", body=b"disk full"))
    assert full_ear.heard == []


async def test_a_listener_that_raises_is_logged_and_the_send_stands(make_broker, caplog):
    broker = await make_broker()
    ear = Ear()

    def broken(message: Message, result: SendResult) -> None:
        raise RuntimeError("listener bug")

    broker.add_stored_listener(broken)
    broker.add_stored_listener(ear)
    with caplog.at_level(logging.ERROR, logger="core.stored_listeners"):
        result = await broker.send(Message(topic="t", body=b"x"))
    assert ear.results == [result] and result.status is SendStatus.SEND_OK
    assert "stored listener" in caplog.text and "listener bug" in caplog.text


class ManualDisk:
    """Stands in for the store's wait for the disk: the test says when, and whether, each record is on disk."""

    def __init__(self) -> None:
        self.waiting: dict[int, asyncio.Future[bool]] = {}

    async def wait_stored(self, end_offset: int) -> PutStatus:
        future = asyncio.get_running_loop().create_future()
        self.waiting[end_offset] = future
        return PutStatus.PUT_OK if await future else PutStatus.FLUSH_DISK_TIMEOUT

    async def until_waiting(self, count: int) -> list[asyncio.Future[bool]]:
        while len(self.waiting) < count:
            await asyncio.sleep(0)
        return [self.waiting[end] for end in sorted(self.waiting)]


@pytest.fixture
async def sync_broker(make_broker, monkeypatch):
    broker = await make_broker(flush_mode=FlushMode.SYNC_FLUSH)
    disk = ManualDisk()
    monkeypatch.setattr(broker.store, "wait_stored", disk.wait_stored)
    ear = Ear()
    broker.add_stored_listener(ear)
    return broker, disk, ear


async def test_a_flush_timeout_is_heard_as_such(sync_broker):
    broker, disk, ear = sync_broker
    sending = asyncio.create_task(broker.send_batch([Message(topic="t", body=b"a"), Message(topic="t", body=b"b")]))
    (flushed,) = await disk.until_waiting(1)
    assert ear.heard == []  # not before the wait for the disk is over
    flushed.set_result(False)
    results = await sending
    assert [r.status for r in results] == [SendStatus.FLUSH_DISK_TIMEOUT] * 2
    assert ear.results == results


async def test_a_send_known_on_disk_has_every_earlier_one_heard_first(sync_broker):
    broker, disk, ear = sync_broker
    first = asyncio.create_task(broker.send(Message(topic="t", body=b"first")))
    second = asyncio.create_task(broker.send(Message(topic="t", body=b"second")))
    first_wait, second_wait = await disk.until_waiting(2)
    second_wait.set_result(True)  # the later record is on disk: so is the earlier one
    second_result = await second
    assert ear.bodies == [b"first", b"second"] and ear.results[1] is second_result
    assert not first.done()
    first_wait.set_result(False)  # too late to say otherwise: it was heard, and is answered, as on disk
    first_result = await first
    assert first_result.status is SendStatus.SEND_OK and ear.results[0] is first_result
    assert len(ear.heard) == 2


async def test_a_cancelled_sender_s_messages_are_heard_as_not_confirmed_and_in_store_order(sync_broker):
    broker, disk, ear = sync_broker
    first = asyncio.create_task(broker.send(Message(topic="t", body=b"first")))
    second = asyncio.create_task(broker.send(Message(topic="t", body=b"second")))
    third = asyncio.create_task(broker.send(Message(topic="t", body=b"third")))
    first_wait, _, third_wait = await disk.until_waiting(3)
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    assert ear.heard == []  # in the log, but the first is not heard yet
    first_wait.set_result(True)
    await first
    assert ear.bodies == [b"first", b"second"]
    assert [r.status for r in ear.results] == [SendStatus.SEND_OK, SendStatus.FLUSH_DISK_TIMEOUT]
    third_wait.set_result(True)
    await third
    assert ear.bodies == [b"first", b"second", b"third"]


async def test_wait_false_is_answered_at_once_under_a_sync_master_and_heard_in_store_order(make_broker):
    """RocketMQ's WAIT=false: a SYNC_MASTER without a slave answers it SEND_OK at once (nobody waits for a slave);
    a send without it is SLAVE_NOT_AVAILABLE; the listeners hear both, in store order."""
    from core import PROPERTY_WAIT, BrokerRole, HAConfig

    broker = await make_broker(role=BrokerRole.SYNC_MASTER, ha=HAConfig(listen_port=0, host="127.0.0.1"))
    ear = Ear()
    broker.add_stored_listener(ear)
    waited = await broker.send(Message(topic="t", body=b"waits"))
    assert waited.status is SendStatus.SLAVE_NOT_AVAILABLE
    quick = await broker.send(Message(topic="t", body=b"quick", properties={PROPERTY_WAIT: "false"}))
    assert quick.status is SendStatus.SEND_OK
    batch = await broker.send_batch([Message(topic="t", body=b"b", properties={PROPERTY_WAIT: "false"})] * 2)
    assert [r.status for r in batch] == [SendStatus.SEND_OK] * 2
    mixed = await broker.send_batch([Message(topic="t", body=b"m", properties={PROPERTY_WAIT: "false"}),
                                     Message(topic="t", body=b"n")])  # fmt: skip
    assert [r.status for r in mixed] == [SendStatus.SLAVE_NOT_AVAILABLE] * 2
    assert ear.bodies == [b"waits", b"quick", b"b", b"b", b"m", b"n"]
