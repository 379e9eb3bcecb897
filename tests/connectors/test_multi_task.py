"""A sink connector split into several tasks: the topic's queues are shared out, every record reaches one task."""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

from connectors import api
from connectors.plugins import PluginRegistry
from connectors.worker import Worker
from core import Producer

# What each task was given, by connector task number: (topic, queue id, queue offset, body).
RECEIVED: dict[int, list[tuple[str, int, int, bytes]]] = {}


class CollectingTask(api.SinkTask):
    async def start(self, config: dict[str, Any], context: api.TaskContext) -> None:
        self.number = context.task
        RECEIVED.setdefault(self.number, [])

    async def put(self, records: list[api.SinkRecord]) -> None:
        RECEIVED[self.number] += [(r.topic, r.queue_id, r.queue_offset, r.body) for r in records]


class CollectingConnector(api.Connector):
    kind: ClassVar[str] = "sink"
    config_def: ClassVar[api.ConfigDef] = api.ConfigDef().define(
        api.ConfigKey("topics", api.ConfigType.STRING, "topics to read")
    )

    def task_configs(self, values: dict[str, Any], max_tasks: int) -> list[dict[str, Any]]:
        return [dict(values) for _ in range(max_tasks)]

    def task(self) -> api.Task:
        return CollectingTask()


async def test_queues_are_split_over_the_tasks_and_each_record_is_read_once(make_broker, tmp_path):
    RECEIVED.clear()
    broker = await make_broker()
    broker.create_topic("work", 4)
    producer = Producer(broker)
    for n in range(200):
        await producer.send("work", b"%d" % n, sharding_key=f"k{n % 8}")
    plugins = PluginRegistry({"collect": CollectingConnector})
    worker = Worker(broker, tmp_path / "connect", plugins)
    await worker.start()
    try:
        await worker.create("split", {"connector.class": "collect", "topics": "work", "tasks.max": "3"})
        assert [task.task for task in worker.info("split").tasks] == [0, 1, 2]
        deadline = asyncio.get_running_loop().time() + 15
        while sum(len(got) for got in RECEIVED.values()) < 200:
            assert asyncio.get_running_loop().time() < deadline, {k: len(v) for k, v in RECEIVED.items()}
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.3)  # nothing more arrives
        bodies = sorted(body for got in RECEIVED.values() for *_, body in got)
        assert bodies == sorted(b"%d" % n for n in range(200))  # each once
        queues_by_task = {task: {queue for _, queue, _, _ in got} for task, got in RECEIVED.items()}
        seen: set[int] = set()
        for queues in queues_by_task.values():
            assert not queues & seen  # a queue belongs to one task
            seen |= queues
        assert seen == {0, 1, 2, 3}
        assert all(queues_by_task.values())  # 4 queues over 3 tasks: every task has one
        for got in RECEIVED.values():  # queue order kept within each task
            for queue in {q for _, q, _, _ in got}:
                offsets = [offset for _, q, offset, _ in got if q == queue]
                assert offsets == sorted(offsets)
    finally:
        await worker.close()
