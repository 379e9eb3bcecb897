import asyncio
import os
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

import pytest

from connectors.api import QueueRef, SinkRecord
from connectors.sink_runner import sink_record
from core import Broker, ConsumeFromWhere, Producer, PullConsumer
from spark_sink import spark_session
from tests.core.conftest import make_broker  # noqa: F401  (a fixture)

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
MASTER = "local[2]"


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """The process's Spark session for a module's tests (starting it takes seconds); the sink tasks share it."""
    session = spark_session.acquire(MASTER)
    yield session
    spark_session.release()


async def produce(broker: Broker, topic: str, count: int, body: Any = None, batch: int = 250) -> None:
    """`count` messages with varied keys, tags and properties, sent in per-queue batches."""
    producer = Producer(broker)
    per_queue: dict[int, list[Any]] = defaultdict(list)
    for index in range(count):
        message = producer.message(
            topic,
            body(index) if body is not None else f"message {index} ".encode() * (1 + index % 5),
            tags=None if index % 7 == 0 else f"tag{index % 3}",
            keys=[f"k{index}", f"order-{index % 11}"] if index % 2 else None,
            properties={"MQTT_TOPIC": f"devices/d{index % 13}/telemetry", "n": str(index)},
        )
        per_queue[message.queue_id].append(message)
        if len(per_queue[message.queue_id]) == batch:
            await broker.send_batch(per_queue.pop(message.queue_id))
    for messages in per_queue.values():
        await broker.send_batch(messages)


async def sink_records(broker: Broker, topic: str, expect: int) -> list[SinkRecord]:
    """The `expect` messages of `topic` as the runtime hands them to a sink, in queue order (waiting for the
    dispatcher to make them all visible)."""
    deadline = asyncio.get_running_loop().time() + 30
    while len(records := await _read_all(broker, topic)) < expect:
        assert asyncio.get_running_loop().time() < deadline, f"only {len(records)} of {expect} messages visible"
        await asyncio.sleep(0.05)
    assert len(records) == expect
    return records


async def _read_all(broker: Broker, topic: str) -> list[SinkRecord]:
    consumer = PullConsumer(broker, "spark-sink-test", consume_from=ConsumeFromWhere.FIRST_OFFSET)
    records: list[SinkRecord] = []
    for queue in consumer.fetch_queues(topic):
        offset = 0
        while True:
            result = await consumer.pull(queue, offset, max_nums=512)
            if not result.messages:
                break
            records += [sink_record(message) for message in result.messages]
            offset = result.next_begin_offset
    return records


def next_offsets(records: list[SinkRecord]) -> dict[QueueRef, int]:
    offsets: dict[QueueRef, int] = {}
    for record in records:
        offsets[record.queue] = max(offsets.get(record.queue, 0), record.queue_offset + 1)
    return offsets
