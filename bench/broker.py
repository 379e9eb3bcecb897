"""Broker benchmark: in-process produce and clustering consume against raw store appends, in one run.

    python bench/broker.py [--quick] [--rounds N]

* store: N messages of 128 B (with a unique id, as producers set) appended with MessageStore.append, clock
  stopped when the last one is flushed and visible in its consume queue: the store's own rate.
* produce_consume: a Producer sends the same number of 128 B messages to a topic of 4 queues while 2
  PushConsumers of one clustering group (default options: one message per listener call) consume them; the clock
  stops when the last message has been consumed.
Each figure is the median of --rounds runs (this VM's speed drifts); the ratio is the median of per-round ratios.
Both run with mqgate serve's interpreter settings (mqgate.server.apply_interpreter_settings: GC threshold, GIL
switch interval).
Prints key=value lines.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.compiled_report import compiled_state
from core.broker import Broker
from core.client import ConsumeFromWhere, ConsumeStatus, Producer, PushConsumer, PushConsumerOptions
from core.store.config import StoreConfig
from core.store.message import Message
from core.store.message_id import UniqueIdGenerator
from core.store.message_store import MessageStore
from mqgate.process import run as run_on_event_loop
from mqgate.server import apply_interpreter_settings

BODY = os.urandom(128)


def store_rate(directory: Path, count: int) -> float:
    store = MessageStore(StoreConfig(store_dir=directory / "raw"))
    store.open()
    ids = UniqueIdGenerator()
    pool = [Message("bench", BODY, n % 4, {"UNIQ_KEY": ids.next_id()}) for n in range(count)]
    gc.collect()
    gc.freeze()
    try:
        started = time.perf_counter()
        for message in pool:
            store.append(message)
        store.flush()
        store.wait_dispatched(timeout=120)
        return count / (time.perf_counter() - started)
    finally:
        store.close()
        gc.unfreeze()
        shutil.rmtree(directory / "raw")


async def produce_consume(directory: Path, count: int) -> float:
    store = MessageStore(StoreConfig(store_dir=directory / "pc" / "store"))
    store.open()
    broker = Broker(store, directory / "pc" / "config")
    await broker.start()
    broker.create_topic("bench", queue_nums=4)
    done = asyncio.Event()
    consumed = 0

    async def listener(messages, context):  # type: ignore[no-untyped-def]
        nonlocal consumed
        consumed += len(messages)
        if consumed >= count:
            done.set()
        return ConsumeStatus.CONSUME_SUCCESS

    options = PushConsumerOptions(consume_from=ConsumeFromWhere.FIRST_OFFSET)
    consumers = [PushConsumer(broker, "bench-group", listener, options=options) for _ in range(2)]
    for consumer in consumers:
        consumer.subscribe("bench")
        await consumer.start()
    for consumer in consumers:  # let the second member's arrival settle the queue split first
        await consumer.rebalance()
    producer = Producer(broker)
    try:
        started = time.perf_counter()
        for n in range(count):
            await producer.send("bench", BODY)
            if n % 256 == 0:
                await asyncio.sleep(0)  # sends never block under async flush: let the consumers run
        await asyncio.wait_for(done.wait(), timeout=600)
        return count / (time.perf_counter() - started)
    finally:
        for consumer in consumers:
            await consumer.shutdown()
        await broker.close()
        store.close()
        shutil.rmtree(directory / "pc")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="50,000 messages a run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=Path(__file__).resolve().parent.parent / ".bench-tmp")
    args = parser.parse_args()
    apply_interpreter_settings()  # mqgate serve's: GC threshold, GIL switch interval
    count = 50_000 if args.quick else 300_000
    args.dir.mkdir(parents=True, exist_ok=True)
    stores, both, ratios = [], [], []
    with tempfile.TemporaryDirectory(dir=args.dir) as work:
        for _ in range(args.rounds):
            stores.append(store_rate(Path(work), count))
            both.append(run_on_event_loop(produce_consume(Path(work), count)))
            ratios.append(both[-1] / stores[-1])
    print(f"broker.compiled={compiled_state('core')}")
    print(f"broker.store_append.msgs_per_s={statistics.median(stores):.0f}")
    print(f"broker.produce_consume.msgs_per_s={statistics.median(both):.0f}")
    print(f"broker.produce_consume.ratio_to_store={statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
