"""The file sink (the reference sink connector, as Kafka Connect's FileStreamSink): each message becomes one line
of a file, exactly once.

The sink keeps a sidecar `<file>.offsets` (JSON: `{"length": <bytes of the file that are committed>, "offsets":
[[topic, queue id, next offset, broker group], ...]}`; an entry without the group, written before groups were
named, is the group of the node that opens it, TaskContext.group). `flush` appends the buffered lines, fsyncs the
file, then replaces the
sidecar atomically (tmp, fsync, rename, fsync of the directory). At start the file is cut to the recorded length
(lines written after the last sidecar are written again) and the recorded offsets are where the runtime resumes,
so a crash at any moment leaves each message in the file once.

A body holding a newline cannot be one line: `put` refuses such records (api.RecordsFailed), and the runtime
fails the task or dead-letters them, per errors.tolerance.

One file has one writer: the connector has one task, unless `file` holds `{task}`, which each of `tasks.max` tasks
replaces with its number (`/out/lines-{task}.txt`), each task then writing its own file (and sidecar).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from connectors.api import (
    ConfigDef,
    ConfigKey,
    ConfigType,
    Connector,
    Importance,
    QueueRef,
    RecordsFailed,
    SinkRecord,
    SinkTask,
    TaskContext,
)

SIDECAR_SUFFIX = ".offsets"
# In `file`, replaced by the task's number: the connector then runs tasks.max tasks, each with its own file.
TASK_PLACEHOLDER = "{task}"


def _fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class FileSinkTask(SinkTask):
    def __init__(self) -> None:
        self.path = Path()
        self.sidecar = Path()
        self.length = 0
        self.offsets: dict[QueueRef, int] = {}
        self._buffer = bytearray()

    async def start(self, config: dict[str, Any], context: TaskContext) -> None:
        self.path = Path(str(config["file"]).replace(TASK_PLACEHOLDER, str(context.task)))
        self.sidecar = self.path.with_name(self.path.name + SIDECAR_SUFFIX)
        await asyncio.to_thread(self._recover, context.group)

    def _recover(self, group: str) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            recorded = json.loads(self.sidecar.read_text())
        except FileNotFoundError:
            recorded = None
        with open(self.path, "ab") as file:
            size = file.seek(0, os.SEEK_END)
            if recorded is None:
                self.length = size  # a file that was there before the sink: appended to
                return
            self.length = int(recorded["length"])
            if size > self.length:
                file.truncate(self.length)
                os.fsync(file.fileno())
            elif size < self.length:
                raise RuntimeError(
                    f"{self.path}: {size} bytes, but {self.sidecar} records {self.length} written; the file was cut"
                    " by someone else; move both away to start over"
                )
        self.offsets = {}
        for entry in recorded["offsets"]:
            topic, queue, offset = entry[:3]
            broker = str(entry[3]) if len(entry) > 3 else ""
            self.offsets[QueueRef(topic, int(queue), broker).in_group(group)] = int(offset)

    async def stored_offsets(self, queues: Sequence[QueueRef]) -> dict[QueueRef, int]:
        return {queue: self.offsets[queue] for queue in queues if queue in self.offsets}

    async def put(self, records: list[SinkRecord]) -> None:
        failures: list[tuple[SinkRecord, BaseException]] = []
        for record in records:
            if b"\n" in record.body:
                failures.append((record, ValueError(f"{self.path}: a body holding a newline cannot be one line")))
            else:
                self._buffer += record.body
                self._buffer += b"\n"
        if failures:
            raise RecordsFailed(failures)

    async def flush(self, offsets: dict[QueueRef, int]) -> None:
        data, self._buffer = bytes(self._buffer), bytearray()
        self.length = await asyncio.to_thread(self._write, data, {**self.offsets, **offsets})
        self.offsets.update(offsets)

    def _write(self, data: bytes, offsets: dict[QueueRef, int]) -> int:
        with open(self.path, "r+b") as file:
            file.seek(self.length)
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        length = self.length + len(data)
        tmp = self.sidecar.with_name(self.sidecar.name + ".tmp")
        entries = [[q.topic, q.queue_id, o, q.broker] for q, o in sorted(offsets.items(), key=str)]
        content = {"length": length, "offsets": entries}
        with open(tmp, "w") as file:
            json.dump(content, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, self.sidecar)
        _fsync_directory(self.sidecar.parent)
        return length


class FileSinkConnector(Connector):
    kind: ClassVar[str] = "sink"
    version: ClassVar[str] = "1.0"
    config_def: ClassVar[ConfigDef] = (
        ConfigDef()
        .define(
            ConfigKey(
                "file",
                ConfigType.STRING,
                "the file lines are appended to; {task} in it: tasks.max tasks, each its own file",
                importance=Importance.HIGH,
            )
        )
        .define(ConfigKey("topics", ConfigType.LIST, "the topics to read", importance=Importance.HIGH))
    )

    def task_configs(self, values: dict[str, Any], max_tasks: int) -> list[dict[str, Any]]:
        if TASK_PLACEHOLDER not in str(values["file"]):
            return [dict(values)]  # one file, one writer
        return [dict(values) for _ in range(max_tasks)]

    def task(self) -> FileSinkTask:
        return FileSinkTask()
