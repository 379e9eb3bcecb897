"""When a sink runner reads: again at once while a queue holds more than one batch, on an arrival once it has caught
up, and never waiting for its backstop with messages left (the backstop here is an hour: a runner that waited for
it would fail the test)."""

from __future__ import annotations

import asyncio
from typing import Any

from connectors import api
from connectors.sink_runner import SinkRunner
from connectors.task_runner import Arrivals
from core import MessageQueue, Producer

NEVER_S = 30.0


class CollectingTask(api.SinkTask):
    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.batches: list[int] = []
        self.grew = asyncio.Event()

    async def put(self, records: list[api.SinkRecord]) -> None:
        self.bodies += [record.body for record in records]
        self.batches.append(len(records))
        self.grew.set()

    async def until(self, count: int) -> None:
        while len(self.bodies) < count:
            self.grew.clear()
            await self.grew.wait()


async def test_a_backlog_is_read_batch_after_batch_and_a_new_message_wakes_the_runner(make_broker: Any) -> None:
    broker = await make_broker()
    broker.create_topic("work", 1)
    producer = Producer(broker)
    for n in range(35):
        await producer.send("work", b"%d" % n)
    await broker.wait_visible(NEVER_S)
    arrivals = Arrivals()
    broker.add_arrival_listener(arrivals.notify)
    task = CollectingTask()
    queue = MessageQueue("work", broker.config.broker_name, 0)
    runner = SinkRunner(broker, arrivals, "reads", 0, task, {"batch.size": 10}, [queue], idle_wait_s=3600)
    runner.start()
    try:
        await asyncio.wait_for(task.until(35), NEVER_S)  # 4 reads with no arrival between them
        assert task.batches == [10, 10, 10, 5]
        await producer.send("work", b"35")
        await asyncio.wait_for(task.until(36), NEVER_S)  # woken by the arrival, not the hour-long backstop
        assert task.bodies == [b"%d" % n for n in range(36)]
    finally:
        await runner.stop()
        await arrivals.close()
