"""All consume queues of a store, by (topic, queue id), created on first use and loaded from disk at start."""

from __future__ import annotations

import threading
from pathlib import Path

from core.store.message import is_light_queue
from core.store.queues.consume_queue import ConsumeQueue


class ConsumeQueueTable:
    def __init__(self, root: Path, entries_per_file: int, light_entries_per_file: int | None = None) -> None:
        self.root = root
        self.entries_per_file = entries_per_file
        self.light_entries_per_file = light_entries_per_file or entries_per_file
        self._queues: dict[tuple[str, int], ConsumeQueue] = {}
        self._lock = threading.Lock()

    def load(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        for topic_dir in sorted(self.root.iterdir()):
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                if queue_dir.is_dir() and queue_dir.name.isdigit():
                    queue = self._new(topic_dir.name, int(queue_dir.name))
                    queue.load()
                    self._queues[(topic_dir.name, int(queue_dir.name))] = queue

    def _new(self, topic: str, queue_id: int) -> ConsumeQueue:
        size = self.light_entries_per_file if is_light_queue(topic) else self.entries_per_file
        return ConsumeQueue(self.root, topic, queue_id, size)

    def get(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        return self._queues.get((topic, queue_id))

    def get_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        queue = self._queues.get((topic, queue_id))
        if queue is None:
            with self._lock:
                queue = self._queues.get((topic, queue_id))
                if queue is None:
                    queue = self._new(topic, queue_id)
                    self._queues = {**self._queues, (topic, queue_id): queue}
        return queue

    def all(self) -> list[ConsumeQueue]:
        return list(self._queues.values())

    def queue_ids(self, topic: str) -> list[int]:
        return sorted(queue_id for (name, queue_id) in self._queues if name == topic)

    def topics(self) -> set[str]:
        return {name for name, _ in self._queues}

    def delete_topic(self, topic: str) -> int:
        with self._lock:
            doomed = [queue for key, queue in self._queues.items() if key[0] == topic]
            self._queues = {key: queue for key, queue in self._queues.items() if key[0] != topic}
        for queue in doomed:
            queue.destroy()
        topic_dir = self.root / topic
        for queue_dir in topic_dir.glob("*"):
            if queue_dir.is_dir() and not any(queue_dir.iterdir()):
                queue_dir.rmdir()
        if topic_dir.is_dir() and not any(topic_dir.iterdir()):
            topic_dir.rmdir()
        return len(doomed)

    def close(self) -> None:
        for queue in self._queues.values():
            queue.close()
