"""A broker restart between produce and consume, clean and by SIGKILL: no acknowledged message is lost and
committed offsets are kept (the killed process had persisted them, as the periodic persister does)."""

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from core.broker import BrokerConfig
from core.client import ConsumeFromWhere, Producer, PullConsumer
from core.results import PullStatus
from core.store.config import FlushMode

from .conftest import SMALL_STORE

ROOT = Path(__file__).resolve().parents[2]


async def consume_all(broker, group, topic):
    consumer = PullConsumer(broker, group, consume_from=ConsumeFromWhere.FIRST_OFFSET)
    bodies = []
    for queue in consumer.fetch_queues(topic):
        offset = consumer.start_offset(queue)
        while True:
            got = await consumer.pull(queue, offset, max_nums=64)
            if got.status is not PullStatus.FOUND:
                break
            bodies += [m.body for m in got.messages]
            offset = got.next_begin_offset
    return bodies


async def test_clean_restart_keeps_messages_and_offsets(make_broker, tmp_path):
    broker = await make_broker(tmp_path, flush_mode=FlushMode.SYNC_FLUSH)
    broker.create_topic("r", queue_nums=2)
    producer = Producer(broker)
    sent = [
        await producer.send("r", b"m%d" % n, selector=lambda qs, m, a: qs[a], selector_arg=n % 2) for n in range(100)
    ]
    assert all(result.status.value == "SEND_OK" for result in sent)
    broker.commit_offset("g", "r", 0, 30)
    await broker.close()
    broker.store.close()
    again = await make_broker(tmp_path, flush_mode=FlushMode.SYNC_FLUSH)
    assert again.query_offset("g", "r", 0) == 30
    assert again.topic_config("r").read_queue_nums == 2
    await again.store.wait_visible()
    assert sorted(await consume_all(again, "fresh", "r")) == sorted(b"m%d" % n for n in range(100))
    rest = await consume_all(again, "g", "r")
    assert len(rest) == 100 - 30


async def test_sigkill_between_produce_and_consume_loses_nothing_and_keeps_offsets(make_broker, tmp_path):
    code = textwrap.dedent(f"""
        import asyncio, json, os, signal, time
        from pathlib import Path
        from core.broker import Broker, BrokerConfig
        from core.client import Producer
        from core.store.config import FlushMode, StoreConfig
        from core.store.message_store import MessageStore
        async def main():
            directory = Path({str(tmp_path)!r})
            store = MessageStore(StoreConfig(store_dir=directory / "store", flush_mode=FlushMode.SYNC_FLUSH,
                                             **{SMALL_STORE!r}))
            store.open()
            broker = Broker(store, directory / "config", BrokerConfig(offset_persist_interval_s=0.05))
            await broker.start()
            broker.create_topic("r", queue_nums=2)
            producer = Producer(broker)
            for n in range(200):
                result = await producer.send("r", b"m%d" % n, selector=lambda qs, m, a: qs[a], selector_arg=n % 2)
                assert result.status.value == "SEND_OK"
            broker.commit_offset("g", "r", 0, 40)
            broker.commit_offset("g", "r", 1, 7)
            offsets = directory / "config" / "consumerOffset.json"
            while not offsets.exists() or '"0": 40' not in offsets.read_text():
                await asyncio.sleep(0.01)
            print("acked", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
        asyncio.run(main())
    """)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == -signal.SIGKILL, result.stderr[-2000:]
    assert result.stdout.strip() == "acked"
    assert (tmp_path / "store" / "abort").exists()
    broker = await make_broker(tmp_path, config=BrokerConfig(auto_create_topic=False))
    assert broker.store.recovery.clean is False
    assert broker.query_offset("g", "r", 0) == 40 and broker.query_offset("g", "r", 1) == 7
    await broker.store.wait_visible()
    assert sorted(await consume_all(broker, "audit", "r")) == sorted(b"m%d" % n for n in range(200))
    assert len(await consume_all(broker, "g", "r")) == 200 - 40 - 7
    offsets = json.loads((tmp_path / "config" / "consumerOffset.json").read_text())["offsetTable"]
    assert offsets["r@g"] == {"0": 40, "1": 7}
