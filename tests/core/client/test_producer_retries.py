"""Producer send timeouts and retries against a store that really refuses writes: the broker's store sits on a small
tmpfs that a filler file pushes over disk_refuse_ratio and back (the tests run as root, as CI does; skipped where
mount is refused). What was refused is retried and stored once; bad input is never retried; a send that runs out
of time says so."""

import asyncio
import logging
import subprocess
import uuid
from pathlib import Path

import pytest

from core import (
    Broker,
    BrokerConfig,
    IllegalMessageError,
    LocalTransactionState,
    Producer,
    PullStatus,
    RequestTimeoutError,
    SendStatus,
    ServiceNotAvailableError,
    TransactionProducer,
)
from core.system_topics import PROPERTY_REAL_TOPIC, TRANS_HALF_TOPIC

from ..conftest import open_broker_store

FS_MB = 64
FILLER_MB = 40  # 62% of the file system: over the refuse ratio of 50%
RATIOS = {"disk_clean_ratio": 0.45, "disk_warn_ratio": 0.48, "disk_refuse_ratio": 0.5}


@pytest.fixture
def small_fs(tmp_path):
    mount_point = tmp_path / f"fs-{uuid.uuid4().hex[:6]}"
    mount_point.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={FS_MB}m", "tmpfs", str(mount_point)], capture_output=True
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.decode().strip()}")
    yield mount_point
    subprocess.run(["umount", "-l", str(mount_point)], check=False)


class Disk:
    """The broker's disk, filled over the refuse ratio and emptied again; retention looks every 20 ms."""

    def __init__(self, directory: Path) -> None:
        self.filler = directory / "filler"

    async def fill(self, store) -> None:
        with self.filler.open("wb") as out:
            for _ in range(FILLER_MB):
                out.write(b"\0" * (1024 * 1024))
        await self._until(lambda: not store.writable, "the store to refuse writes")

    async def empty(self, store) -> None:
        self.filler.unlink()
        await self._until(lambda: store.writable, "the store to take writes again")

    @staticmethod
    async def _until(condition, what: str) -> None:
        for _ in range(500):
            if condition():
                return
            await asyncio.sleep(0.01)
        raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture
async def refusing(small_fs):
    store = open_broker_store(
        small_fs,
        segment_size=1024 * 1024,
        max_message_size=64 * 1024,
        retention_check_interval_s=0.02,
        **RATIOS,
    )
    broker = Broker(store, small_fs / "config", BrokerConfig())
    await broker.start()
    yield broker, Disk(small_fs)
    await broker.close()
    store.close()


async def stored_in(broker, topic):
    await broker.wait_visible()
    found = []
    for queue in range(broker.topic_config(topic).read_queue_nums):
        got = await broker.pull("audit", topic, queue, 0, max_count=256)
        if got.status is PullStatus.FOUND:
            found += got.messages
    return found


async def until_logged(caplog, text: str) -> None:
    for _ in range(500):
        if any(text in record.getMessage() for record in caplog.records):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"nothing logged with {text!r}")


async def test_a_refused_send_is_retried_until_the_store_takes_it_and_is_stored_once(refusing, caplog):
    broker, disk = refusing
    broker.create_topic("r", queue_nums=1)
    await disk.fill(broker.store)
    producer = Producer(broker, retry_times_when_send_failed=50, send_msg_timeout_ms=20_000)
    with caplog.at_level(logging.WARNING, logger="core.client.send_retry"):
        sending = asyncio.ensure_future(producer.send("r", b"once", keys="k-1"))
        await until_logged(caplog, "attempt 2 of 51 refused")
        assert not sending.done()
        await disk.empty(broker.store)
        result = await sending
    assert result.status is SendStatus.SEND_OK
    [message] = await stored_in(broker, "r")
    assert (message.body, message.keys, message.unique_id) == (b"once", ["k-1"], result.msg_id)
    retries = [r.getMessage() for r in caplog.records if r.name == "core.client.send_retry"]
    assert len(retries) >= 2 and all(f"message {result.msg_id}: attempt" in text for text in retries)


async def test_a_send_the_store_never_takes_runs_out_of_time(refusing):
    broker, disk = refusing
    broker.create_topic("r", queue_nums=1)
    await disk.fill(broker.store)
    producer = Producer(broker, retry_times_when_send_failed=1000, send_msg_timeout_ms=300)
    loop = asyncio.get_running_loop()
    began = loop.time()
    with pytest.raises(RequestTimeoutError, match=r"send_msg_timeout_ms 300 ran out after .* no attempt stored it"):
        await producer.send("r", b"never")
    assert 0.3 <= loop.time() - began < 5
    # With RocketMQ's 2 retries the refusals run out first: the store's error, after 3 attempts.
    with pytest.raises(ServiceNotAvailableError, match=r"refused 3 times, the last time: .*disk_refuse_ratio"):
        await Producer(broker).send("r", b"never either")
    await disk.empty(broker.store)
    assert await stored_in(broker, "r") == []


async def test_bad_input_is_not_retried(refusing, caplog):
    broker, _ = refusing
    producer = Producer(broker, retry_times_when_send_failed=5)
    with (
        caplog.at_level(logging.WARNING, logger="core.client.send_retry"),
        pytest.raises(IllegalMessageError, match="delay level '99' does not exist"),
    ):
        await producer.send("r", b"bad", properties={"DELAY": "99"})
    assert not [r for r in caplog.records if r.name == "core.client.send_retry"]


async def test_a_refused_half_message_is_retried_as_sent_and_parked_once(refusing):
    # The broker rewrites a half message in place when it parks it: a retry must send the message as it was.
    broker, disk = refusing
    broker.create_topic("orders", queue_nums=1)
    producer = TransactionProducer(
        broker, "pg", lambda message: LocalTransactionState.COMMIT_MESSAGE, retry_times_when_send_failed=50
    )
    await producer.start()
    await disk.fill(broker.store)
    sending = asyncio.ensure_future(
        producer.send_message_in_transaction("orders", b"t", lambda m, a: LocalTransactionState.COMMIT_MESSAGE)
    )
    await asyncio.sleep(0.1)
    await disk.empty(broker.store)
    result = await sending
    assert result.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
    [half] = await stored_in(broker, TRANS_HALF_TOPIC)
    assert half.properties[PROPERTY_REAL_TOPIC] == "orders"
    [message] = await stored_in(broker, "orders")
    assert message.body == b"t" and message.unique_id == result.msg_id
    await producer.shutdown()


async def test_async_sends_retry_and_oneway_sends_do_not(refusing, caplog):
    broker, disk = refusing
    broker.create_topic("r", queue_nums=1)
    await disk.fill(broker.store)
    heard = []
    producer = Producer(broker, retry_times_when_send_failed=0, retry_times_when_send_async_failed=3)
    with caplog.at_level(logging.WARNING):
        await asyncio.gather(
            producer.send_async("r", b"a", callback=lambda result, error: heard.append(error)), return_exceptions=True
        )
        producer.send_oneway("r", b"o")
        await producer.shutdown()
    [error] = heard
    assert isinstance(error, ServiceNotAvailableError) and "refused 4 times" in str(error)
    messages = [r.getMessage() for r in caplog.records]
    assert sum("attempt" in text and "refused" in text for text in messages) == 3
    assert sum(text.startswith("oneway send failed") for text in messages) == 1
    with pytest.raises(ServiceNotAvailableError, match="refused once, the last time"):
        await producer.send("r", b"s")


def test_retry_settings_out_of_range_are_refused():
    with pytest.raises(ValueError, match="send_msg_timeout_ms must be"):
        Producer(None, send_msg_timeout_ms=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="retry times must be"):
        Producer(None, retry_times_when_send_async_failed=-1)  # type: ignore[arg-type]
