"""A keyed table kept in the core: every change is a core message in one queue, and a snapshot file says where
to start reading (Kafka's compacted topic, with the compaction done as a snapshot).

The MQTT gateway keeps retained messages and persistent sessions this way; the connector runtime its connector
configs and source positions. A change is applied in memory and
appended to the queue before the client is answered, so it is as durable as any message; the snapshot only
saves reading the whole queue at start and outlives the log's retention (72 hours by default). It is written
every `SNAPSHOT_INTERVAL_S` when something changed and at close.

Snapshot (JSON): {"offset": <queue offset to replay from>, "entries": {"<key>": <value>}}. The offset is read
before the entries are copied, so every change not in the snapshot is at or past it; changes in both are
replayed again, in order, and the table ends in the same state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from core.broker import Broker
from core.errors import ConfigFileError
from core.results import PullStatus
from core.store.message import StoredMessage
from core.tables.json_file import read_json, write_json

log = logging.getLogger(__name__)

V = TypeVar("V")

SNAPSHOT_INTERVAL_S = 60.0
REPLAY_BATCH = 256
# Offsets of replay reads are nobody's consumer group: this name only labels the reads.
REPLAY_GROUP = "STATE_TABLE_REPLAY"


class StateTable(Generic[V]):
    def __init__(
        self,
        broker: Broker,
        topic: str,
        snapshot: Path,
        decode_change: Callable[[StoredMessage], tuple[str, V | None] | None],
        to_json: Callable[[V], object],
        from_json: Callable[[object], V],
    ) -> None:
        self.broker = broker
        self.topic = topic
        self.snapshot = snapshot
        self._decode_change = decode_change
        self._to_json = to_json
        self._from_json = from_json
        self.entries: dict[str, V] = {}
        self._dirty = False
        self._saver: asyncio.Task[None] | None = None

    async def load(self) -> None:
        """Read the snapshot, then every change queued since."""
        data = read_json(self.snapshot)
        offset = 0
        if data is not None:
            if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
                raise ConfigFileError(self.snapshot, "expected an object with 'offset' and 'entries'")
            offset = int(data.get("offset", 0))
            for key, value in data["entries"].items():
                try:
                    self.entries[key] = self._from_json(value)
                except (ValueError, KeyError, TypeError) as exc:
                    raise ConfigFileError(self.snapshot, f"entry {key!r}: {exc}") from exc
        low = self.broker.min_offset(self.topic, 0)
        if offset < low:
            log.error(
                "%s: changes %d..%d of %s were removed by retention before a snapshot saved them",
                self.snapshot,
                offset,
                low,
                self.topic,
            )
            offset = low
        replayed = 0
        # The core's own reader: it exists whatever auto_create_group says (off in production).
        self.broker.create_groups([REPLAY_GROUP])
        while True:
            got = await self.broker.pull(REPLAY_GROUP, self.topic, 0, offset, REPLAY_BATCH)
            if got.status is not PullStatus.FOUND:
                if got.status is PullStatus.OFFSET_ILLEGAL and got.next_begin_offset > offset:
                    offset = got.next_begin_offset
                    continue
                break
            for message in got.messages:
                change = self._decode_change(message)
                if change is not None:
                    self._apply(*change)
                    replayed += 1
            offset = got.next_begin_offset
        if replayed:
            self._dirty = True
        log.info(
            "%s: %d entries, %d changes replayed from %s", self.snapshot.name, len(self.entries), replayed, self.topic
        )

    def start(self) -> None:
        self._saver = asyncio.get_running_loop().create_task(self._save_periodically())

    async def close(self) -> None:
        if self._saver is not None:
            self._saver.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._saver
        self.save()

    def _apply(self, key: str, value: V | None) -> None:
        if value is None:
            self.entries.pop(key, None)
        else:
            self.entries[key] = value

    def changed(self, key: str, value: V | None) -> None:
        """Apply a change in memory (the caller appends its message to the queue)."""
        self._apply(key, value)
        self._dirty = True

    def _snapshot(self) -> dict[str, object] | None:
        """The snapshot's content (on the event loop, where the entries change), or None if nothing changed."""
        if not self._dirty:
            return None
        self._dirty = False
        # The offset first: a change appended while the entries are copied is replayed, not lost.
        offset = self.broker.max_offset(self.topic, 0)
        return {"offset": offset, "entries": {key: self._to_json(value) for key, value in self.entries.items()}}

    def save(self) -> None:
        data = self._snapshot()
        if data is not None:
            write_json(self.snapshot, data)

    async def _save_periodically(self) -> None:
        while True:
            await asyncio.sleep(SNAPSHOT_INTERVAL_S)
            data = self._snapshot()
            if data is None:
                continue
            try:
                await asyncio.to_thread(write_json, self.snapshot, data)
            except ConfigFileError:
                self._dirty = True
                log.exception("%s: snapshot not written; retrying in %.0f s", self.snapshot, SNAPSHOT_INTERVAL_S)
