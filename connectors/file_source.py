"""The file source (the reference source connector, as Kafka Connect's FileStreamSource): each line of a file
becomes a message. Partition `{"file": <path as configured>}`; position `{"position": <byte offset of the next
line>}`. A last line without its newline is left until the newline comes (the writer may be mid-line)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, ClassVar

from connectors.api import (
    ConfigDef,
    ConfigKey,
    ConfigType,
    Connector,
    Importance,
    SourceRecord,
    SourceTask,
    TaskContext,
    at_least,
)

log = logging.getLogger(__name__)

# Bytes read per poll at most; a line longer than this is read in several polls before it is sent.
READ_CHUNK = 1024 * 1024


class FileSourceTask(SourceTask):
    def __init__(self) -> None:
        self.path = ""
        self.topic = ""
        self.batch_size = 100
        self.position = 0
        self._partial = b""
        self._missing_logged = False

    async def start(self, config: dict[str, Any], context: TaskContext) -> None:
        self.path = config["file"]
        self.topic = config["topic"]
        self.batch_size = config["batch.size"]
        committed = context.position({"file": self.path})
        self.position = int(committed["position"]) if committed else 0

    def _read(self) -> bytes:
        try:
            with open(self.path, "rb") as file:
                file.seek(self.position + len(self._partial))
                return file.read(READ_CHUNK)
        except FileNotFoundError:
            if not self._missing_logged:
                log.warning("file source: %s does not exist (yet); waiting for it", self.path)
                self._missing_logged = True
            return b""

    async def poll(self) -> list[SourceRecord]:
        data = self._partial + await asyncio.to_thread(self._read)
        records: list[SourceRecord] = []
        start = 0
        while len(records) < self.batch_size:
            end = data.find(b"\n", start)
            if end < 0:
                break
            self.position += end + 1 - start
            records.append(SourceRecord({"file": self.path}, {"position": self.position}, self.topic, data[start:end]))
            start = end + 1
        # Keep at most what is unread past the last whole line; it is read again next time if a batch was full.
        self._partial = data[start:] if len(records) < self.batch_size else b""
        return records


class FileSourceConnector(Connector):
    kind: ClassVar[str] = "source"
    version: ClassVar[str] = "1.0"
    config_def: ClassVar[ConfigDef] = (
        ConfigDef()
        .define(ConfigKey("file", ConfigType.STRING, "the file to read, line by line", importance=Importance.HIGH))
        .define(ConfigKey("topic", ConfigType.STRING, "the topic each line is sent to", importance=Importance.HIGH))
        .define(
            ConfigKey("batch.size", ConfigType.INT, "the most lines returned by one poll", 2000, validator=at_least(1))
        )
    )

    def task(self) -> FileSourceTask:
        return FileSourceTask()
