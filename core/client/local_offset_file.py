"""A broadcasting consumer's offsets on its own disk (RocketMQ's LocalFileOffsetStore): in broadcasting every member
of a group reads every message, so each keeps its own progress and the broker keeps none.

Where: `<directory>/<instance name>/<group>/offsets.json` (RocketMQ: ~/.rocketmq_offsets/<client id>/<group>/
offsets.json, the client id holding the instance name). Two consumers of one group with one instance name would
share the file and overwrite each other's progress, so the file is taken with an exclusive flock on
`offsets.json.lock` for as long as the consumer runs; RocketMQ refuses the same, one group per client instance.
The kernel drops the lock when the process dies, so a killed consumer's successor opens the file at once.

Layout (RocketMQ's OffsetSerializeWrapper; its file has message queues as object keys, which JSON has not, so
each queue is spelled out):

    {
        "offsetTable": [
            {"topic": "TopicTest", "brokerName": "broker-a", "queueId": 0, "offset": 12},
            {"topic": "TopicTest", "brokerName": "broker-a", "queueId": 1, "offset": 9}
        ]
    }

An offset is the queue offset of the next message to consume. The file is replaced atomically with the previous
version kept as offsets.json.bak, and read from the .bak when missing or empty (core.tables.json_file, as RocketMQ's
MixAll.string2File and readLocalOffsetBak). A malformed file is refused, naming the file: starting over would
consume every message again, or skip them all.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TypeGuard

from core.errors import ConfigFileError, IllegalArgumentError
from core.message_queue import MessageQueue
from core.store.topic_name import MAX_TOPIC_LENGTH, validate_name
from core.tables.json_file import read_json, write_json

log = logging.getLogger(__name__)

OFFSETS_FILE = "offsets.json"
TABLE_KEY = "offsetTable"
# RocketMQ's default instance name (ClientConfig.instanceName); a broadcasting consumer keeps it.
DEFAULT_INSTANCE_NAME = "DEFAULT"


def local_offset_path(directory: Path, instance_name: str, group: str) -> Path:
    """`directory/<instance name>/<group>/offsets.json`; the instance name becomes a directory, so it takes the
    characters of a topic name. IllegalArgumentError otherwise."""
    validate_name("instance name", instance_name, MAX_TOPIC_LENGTH, IllegalArgumentError)
    return Path(directory) / instance_name / group / OFFSETS_FILE


def _is_count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class LocalOffsetFile:
    """One consumer's offsets file. `open` takes the lock and reads; `write` may run on any thread (writes are
    serialized and a snapshot older than one written is skipped); `close` releases the lock."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock_path = path.with_name(path.name + ".lock")
        self._lock_fd = -1
        self._write_lock = threading.Lock()
        self._written_version = -1

    def open(self) -> dict[MessageQueue, int]:
        """Take the file for this consumer and return the offsets in it (none for a new file)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise IllegalArgumentError(
                f"{self.path} is in use by another broadcasting consumer of this group with this instance name;"
                " give each consumer its own instance_name (PushConsumerOptions.instance_name)"
            ) from None
        self._lock_fd = fd
        try:
            offsets = self._read()
        except BaseException:
            self.close()
            raise
        log.info("broadcasting offsets of %d queues loaded from %s", len(offsets), self.path)
        return offsets

    def _read(self) -> dict[MessageQueue, int]:
        content = read_json(self.path)
        if content is None:
            return {}
        table = content.get(TABLE_KEY) if isinstance(content, dict) else None
        if not isinstance(table, list):
            raise ConfigFileError(self.path, f'must hold {{"{TABLE_KEY}": [...]}}, one entry per queue')
        offsets: dict[MessageQueue, int] = {}
        for number, entry in enumerate(table):
            queue, offset = self._entry(number, entry)
            offsets[queue] = offset
        return offsets

    def _entry(self, number: int, entry: object) -> tuple[MessageQueue, int]:
        if isinstance(entry, dict):
            topic, broker_name = entry.get("topic"), entry.get("brokerName")
            queue_id, offset = entry.get("queueId"), entry.get("offset")
            if isinstance(topic, str) and isinstance(broker_name, str) and _is_count(queue_id) and _is_count(offset):
                return MessageQueue(topic, broker_name, queue_id), offset
        raise ConfigFileError(
            self.path,
            f"{TABLE_KEY}[{number}] is {entry!r}; an entry holds topic and brokerName (text), queueId and offset"
            " (integers from 0)",
        )

    def write(self, offsets: Mapping[MessageQueue, int], version: int) -> None:
        """Replace the file with `offsets`, snapshot number `version`, unless a later snapshot is written already
        (a periodic write cancelled while its thread still runs must not overwrite the final one)."""
        table = [
            {"topic": queue.topic, "brokerName": queue.broker_name, "queueId": queue.queue_id, "offset": offset}
            for queue, offset in sorted(offsets.items())
        ]
        with self._write_lock:
            if version <= self._written_version or self._lock_fd < 0:
                return
            write_json(self.path, {TABLE_KEY: table})
            self._written_version = version

    def close(self) -> None:
        with self._write_lock:
            if self._lock_fd >= 0:
                os.close(self._lock_fd)  # releases the flock
                self._lock_fd = -1


__all__ = ["DEFAULT_INSTANCE_NAME", "OFFSETS_FILE", "LocalOffsetFile", "local_offset_path"]
