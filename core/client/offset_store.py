"""Where a consumer's offsets live and where it starts (RocketMQ's OffsetStore and ConsumeFromWhere).

Clustering groups keep their offsets in the broker, which persists them; broadcasting consumers keep theirs
here, each its own, as RocketMQ's LocalFileOffsetStore does on the client. A push consumer's are also kept on disk
(core.client.local_offset_file): loaded at start, written every `persist_offset_interval_s` (RocketMQ's
persistConsumerOffsetInterval, 5 s) and at shutdown, so a restart goes on where it stopped; a crash repeats at most
what was consumed since the last write. A pull consumer's stay in memory, as before.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from core.broker import Broker
from core.client.local_offset_file import LocalOffsetFile, local_offset_path
from core.client.message_codec import ConsumeFromWhere, MessageModel
from core.errors import ConfigFileError
from core.message_queue import MessageQueue

log = logging.getLogger(__name__)

# Under the broker's config_dir unless a consumer names its own directory (RocketMQ: ~/.rocketmq_offsets).
LOCAL_OFFSET_DIR = "localOffsets"


class OffsetStore:
    def __init__(
        self,
        broker: Broker,
        group: str,
        message_model: MessageModel,
        consume_from: ConsumeFromWhere,
        consume_timestamp_ms: int | None,
        instance_name: str | None = None,
        local_offset_dir: Path | None = None,
    ) -> None:
        """With `instance_name`, a broadcasting consumer's offsets are kept in `local_offset_dir` (default
        config_dir/localOffsets)/<instance_name>/<group>/offsets.json."""
        self.broker = broker
        self.group = group
        self.message_model = message_model
        self.consume_from = consume_from
        self.consume_timestamp_ms = consume_timestamp_ms
        self._local: dict[MessageQueue, int] = {}
        self._file: LocalOffsetFile | None = None
        if message_model is MessageModel.BROADCASTING and instance_name is not None:
            directory = local_offset_dir or broker.config_dir / LOCAL_OFFSET_DIR
            self._file = LocalOffsetFile(local_offset_path(directory, instance_name, group))
        self._version = 0  # counts changes of _local, to write only when something changed
        self._persisted_version = 0

    @property
    def local_file(self) -> Path | None:
        """Where a broadcasting consumer's offsets are kept on disk, if they are."""
        return self._file.path if self._file is not None else None

    def committed(self, queue: MessageQueue) -> int:
        """The committed offset of the queue, or -1 if there is none."""
        if self.message_model is MessageModel.BROADCASTING:
            return self._local.get(queue, -1)
        return self.broker.query_offset(self.group, queue.topic, queue.queue_id)

    def commit(self, queue: MessageQueue, offset: int) -> None:
        if self.message_model is MessageModel.BROADCASTING:
            if self._local.get(queue) != offset:
                self._local[queue] = offset
                self._version += 1
        else:
            self.broker.commit_offset(self.group, queue.topic, queue.queue_id, offset)

    def start_offset(self, queue: MessageQueue) -> int:
        """Where to read from: the committed offset, else where ConsumeFromWhere says (TIMESTAMP without a time
        starts at the last offset)."""
        committed = self.committed(queue)
        if committed >= 0:
            return committed
        if self.consume_from is ConsumeFromWhere.FIRST_OFFSET:
            return self.broker.min_offset(queue.topic, queue.queue_id)
        if self.consume_from is ConsumeFromWhere.TIMESTAMP and self.consume_timestamp_ms is not None:
            return self.broker.search_offset(queue.topic, queue.queue_id, self.consume_timestamp_ms)
        return self.broker.max_offset(queue.topic, queue.queue_id)

    # --- the local file of a broadcasting consumer -------------------------------------------------------

    def load(self) -> None:
        """Take the local file and read the offsets in it (at consumer start). IllegalArgumentError when another
        consumer has it, ConfigFileError when it is malformed."""
        if self._file is not None:
            self._local.update(self._file.open())
            self._persisted_version = self._version

    async def persist(self) -> None:
        """Write the offsets to the local file if they changed since the last write (in a thread: it fsyncs)."""
        if self._file is None or self._version == self._persisted_version:
            return
        version, snapshot = self._version, dict(self._local)
        await asyncio.to_thread(self._file.write, snapshot, version)
        self._persisted_version = max(self._persisted_version, version)

    async def persist_periodically(self, interval_s: float) -> None:
        """Persist every `interval_s` until cancelled; a write that fails is logged and tried again next time."""
        if self._file is None:
            return
        while True:
            await asyncio.sleep(interval_s)
            try:
                await self.persist()
            except ConfigFileError:
                log.exception("consumer group %r: broadcasting offsets not written; trying again", self.group)

    async def close(self) -> None:
        """Write the offsets a last time and let the local file go (at consumer shutdown)."""
        if self._file is not None:
            try:
                await self.persist()
            finally:
                self._file.close()
