"""Broadcasting push consumers keep their offsets in a local file (RocketMQ's LocalFileOffsetStore): a consumer
restarted, after a clean shutdown or a SIGKILL after a persist, goes on where it stopped; each instance name has its
own file, and one file serves one consumer at a time."""

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

from core import (
    ConfigFileError,
    ConsumeFromWhere,
    ConsumeStatus,
    IllegalArgumentError,
    MessageModel,
    Producer,
    PushConsumer,
    PushConsumerOptions,
)
from core.client.local_offset_file import local_offset_path

from ..conftest import SMALL_STORE

ROOT = Path(__file__).resolve().parents[3]
BROADCAST = PushConsumerOptions(
    message_model=MessageModel.BROADCASTING,
    consume_from=ConsumeFromWhere.FIRST_OFFSET,
    heartbeat_interval_s=0.05,
    rebalance_interval_s=0.1,
    long_poll_ms=100,
)


async def eventually(condition, timeout=20.0):
    """Wait for a condition of the system under test (the bound only stops a hung test)."""
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0.02)


async def start_consumer(broker, seen, options=BROADCAST, group="fan"):
    async def listener(messages, context):
        seen.extend(message.body for message in messages)
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(broker, group, listener, options=options)
    consumer.subscribe("news")
    await consumer.start()
    return consumer


async def send(broker, bodies):
    producer = Producer(broker)
    for body in bodies:
        await producer.send("news", body)


def offsets_in(path):
    table = json.loads(path.read_text())["offsetTable"]
    return {(entry["topic"], entry["queueId"]): entry["offset"] for entry in table}


async def test_a_clean_restart_goes_on_where_the_consumer_stopped(make_broker, tmp_path):
    broker = await make_broker()
    broker.create_topic("news", queue_nums=2)
    await send(broker, [b"old-%d" % n for n in range(20)])
    seen: list[bytes] = []
    consumer = await start_consumer(broker, seen)
    path = consumer.offsets.local_file
    assert path == tmp_path / "config" / "localOffsets" / "DEFAULT" / "fan" / "offsets.json"
    await eventually(lambda: len(seen) == 20)
    await consumer.shutdown()
    assert offsets_in(path) == {("news", 0): 10, ("news", 1): 10}
    assert json.loads(path.read_text())["offsetTable"][0]["brokerName"] == broker.config.broker_name

    await send(broker, [b"new-%d" % n for n in range(6)])
    again: list[bytes] = []
    consumer = await start_consumer(broker, again)
    await eventually(lambda: len(again) == 6)
    await asyncio.sleep(0.3)  # a few more long polls: nothing old comes back
    await consumer.shutdown()
    assert sorted(again) == sorted(b"new-%d" % n for n in range(6))
    assert offsets_in(path) == {("news", 0): 13, ("news", 1): 13}
    assert offsets_in(path.with_name("offsets.json.bak")) == {("news", 0): 10, ("news", 1): 10}


async def test_each_instance_name_keeps_its_own_offsets(make_broker, tmp_path):
    broker = await make_broker()
    broker.create_topic("news", queue_nums=2)
    await send(broker, [b"m%d" % n for n in range(8)])
    first: list[bytes] = []
    consumer = await start_consumer(broker, first, replace(BROADCAST, instance_name="east"))
    await eventually(lambda: len(first) == 8)
    await consumer.shutdown()
    # Another instance, with a directory of its own: it has consumed nothing, so it starts from the first offset.
    second: list[bytes] = []
    options = replace(BROADCAST, instance_name="west", local_offset_dir=tmp_path / "elsewhere")
    consumer = await start_consumer(broker, second, options)
    await eventually(lambda: len(second) == 8)
    await consumer.shutdown()
    assert (tmp_path / "elsewhere" / "west" / "fan" / "offsets.json").exists()
    assert (tmp_path / "config" / "localOffsets" / "east" / "fan" / "offsets.json").exists()


async def test_one_file_serves_one_consumer_at_a_time(make_broker):
    broker = await make_broker()
    broker.create_topic("news", queue_nums=1)
    consumer = await start_consumer(broker, [])
    twin = PushConsumer(broker, "fan", lambda messages, context: None, options=BROADCAST)
    twin.subscribe("news")
    with pytest.raises(IllegalArgumentError, match="give each consumer its own instance_name"):
        await twin.start()
    await consumer.shutdown()
    successor = await start_consumer(broker, [])
    await successor.shutdown()


async def test_clustering_consumers_keep_no_local_file(make_broker, tmp_path):
    broker = await make_broker()
    broker.create_topic("news", queue_nums=1)
    consumer = await start_consumer(broker, [], replace(BROADCAST, message_model=MessageModel.CLUSTERING))
    assert consumer.offsets.local_file is None
    await consumer.shutdown()
    assert not (tmp_path / "config" / "localOffsets").exists()


async def test_a_malformed_offsets_file_is_refused_naming_it(make_broker, tmp_path):
    broker = await make_broker()
    broker.create_topic("news", queue_nums=1)
    path = tmp_path / "config" / "localOffsets" / "DEFAULT" / "fan" / "offsets.json"
    path.parent.mkdir(parents=True)
    path.write_text('{"offsetTable": [{"topic": "news", "brokerName": "broker-a", "queueId": 0, "offset": -3}]}')
    with pytest.raises(ConfigFileError, match=r"offsets\.json: offsetTable\[0\] is .*integers from 0"):
        await start_consumer(broker, [])
    path.write_text('{"offsetTable": [')
    with pytest.raises(ConfigFileError, match="line 1 column"):
        await start_consumer(broker, [])


def test_an_instance_name_must_be_a_safe_directory_name(tmp_path):
    assert local_offset_path(tmp_path, "DEFAULT", "g") == tmp_path / "DEFAULT" / "g" / "offsets.json"
    with pytest.raises(IllegalArgumentError, match=r"instance name '\.\./up': '\.' is not allowed"):
        local_offset_path(tmp_path, "../up", "g")


async def test_a_sigkill_after_a_persist_keeps_the_offsets(make_broker, tmp_path):
    # The child consumes 30 messages, waits until the periodic persist has written every offset, and is killed.
    code = textwrap.dedent(f"""
        import asyncio, json, os, signal
        from pathlib import Path
        from core import (Broker, ConsumeFromWhere, ConsumeStatus, MessageModel, MessageStore, Producer,
                          PushConsumer, PushConsumerOptions, StoreConfig)

        async def main():
            directory = Path({str(tmp_path)!r})
            store = MessageStore(StoreConfig(store_dir=directory / "store", **{SMALL_STORE!r}))
            store.open()
            broker = Broker(store, directory / "config")
            await broker.start()
            broker.create_topic("news", queue_nums=3)
            producer = Producer(broker)
            for n in range(30):
                await producer.send("news", b"old-%d" % n)
            seen = []

            async def listener(messages, context):
                seen.extend(messages)
                return ConsumeStatus.CONSUME_SUCCESS

            options = PushConsumerOptions(message_model=MessageModel.BROADCASTING, instance_name="node-1",
                                          consume_from=ConsumeFromWhere.FIRST_OFFSET, long_poll_ms=100,
                                          persist_offset_interval_s=0.05)
            consumer = PushConsumer(broker, "fan", listener, options=options)
            consumer.subscribe("news")
            await consumer.start()
            path = consumer.offsets.local_file
            while True:
                await asyncio.sleep(0.02)
                if len(seen) == 30 and path.exists():
                    table = json.loads(path.read_text())["offsetTable"]
                    if sum(entry["offset"] for entry in table) == 30:
                        break
            print("persisted", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)

        asyncio.run(main())
    """)
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    assert done.stdout.strip() == "persisted"
    broker = await make_broker(tmp_path)
    assert broker.store.recovery.clean is False
    await send(broker, [b"new-%d" % n for n in range(5)])
    seen: list[bytes] = []
    consumer = await start_consumer(broker, seen, replace(BROADCAST, instance_name="node-1"))
    await eventually(lambda: len(seen) == 5)
    await asyncio.sleep(0.3)
    await consumer.shutdown()
    assert sorted(seen) == sorted(b"new-%d" % n for n in range(5))
