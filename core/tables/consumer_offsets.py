"""Consumer offsets of clustering groups, kept in `consumerOffset.json` (RocketMQ's ConsumerOffsetManager).

An offset is the consume-queue index of the next message the group will read from one queue. Broadcasting
consumers keep their offsets themselves and never appear here.

File layout, as RocketMQ's broker writes it (so a RocketMQ consumerOffset.json loads here):

    {
        "offsetTable": {
            "TopicTest@GID_orders": {"0": 12, "1": 10, "2": 11, "3": 9}
        }
    }

Keys join topic and group with '@', which neither a topic nor a group name may contain.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from pathlib import Path

from core.errors import ConfigFileError, GroupConfigError, InvalidOffsetError
from core.store.errors import InvalidTopicError
from core.store.topic_name import validate_topic
from core.tables.json_file import read_json, write_json
from core.tables.subscription_group import validate_group

log = logging.getLogger(__name__)

CONSUMER_OFFSET_FILE = "consumerOffset.json"
TABLE_KEY = "offsetTable"
SEPARATOR = "@"
# What query_offset answers for a queue the group has never committed (RocketMQ answers -1 too); the consumer
# then starts where its consume-from-where setting says.
NO_OFFSET = -1


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class ConsumerOffsetManager:
    """Offsets per (group, topic, queue). All methods are thread-safe; persist() writes only after a change."""

    def __init__(self, config_dir: Path) -> None:
        self.path = Path(config_dir) / CONSUMER_OFFSET_FILE
        self._lock = threading.Lock()
        # Held across a whole persist so two persists never share the .tmp file; commits only need _lock.
        self._persist_lock = threading.Lock()
        self._table: dict[str, dict[int, int]] = {}
        # Counts changes; persist() compares it with the count it last wrote to skip writing an unchanged table.
        self._changes = 0
        self._persisted_changes = 0
        self.load()

    def load(self) -> None:
        """Replace the offsets in memory with those in the file (none when there is no file).

        Offsets committed since the last persist() are dropped. Raises ConfigFileError for a malformed file.
        """
        table = self._read()
        with self._persist_lock, self._lock:
            self._table = table
            self._persisted_changes = self._changes
        log.info("loaded offsets of %d topic@group pairs from %s", len(table), self.path)

    def _read(self) -> dict[str, dict[int, int]]:
        content = read_json(self.path)
        if content is None:
            return {}
        if not isinstance(content, dict):
            raise ConfigFileError(self.path, f"the top level must be a JSON object, found {type(content).__name__}")
        raw_table = content.get(TABLE_KEY, {})
        if not isinstance(raw_table, dict):
            raise ConfigFileError(self.path, f"{TABLE_KEY} must be a JSON object, found {type(raw_table).__name__}")
        table: dict[str, dict[int, int]] = {}
        for key, queues in raw_table.items():
            topic, separator, group = key.partition(SEPARATOR)
            if not separator or not topic or not group:
                raise ConfigFileError(self.path, f"{TABLE_KEY} key {key!r} is not of the form 'topic@group'")
            if not isinstance(queues, dict):
                raise ConfigFileError(self.path, f"{TABLE_KEY}[{key!r}] must be an object, found {queues!r}")
            offsets: dict[int, int] = {}
            for queue_text, offset in queues.items():
                if not queue_text.isascii() or not queue_text.isdigit():
                    raise ConfigFileError(self.path, f"{TABLE_KEY}[{key!r}]: queue id {queue_text!r} is not a number")
                if not _is_int(offset) or offset < 0:
                    raise ConfigFileError(
                        self.path,
                        f"{TABLE_KEY}[{key!r}][{queue_text!r}]: offset {offset!r} is not a non-negative integer",
                    )
                offsets[int(queue_text)] = offset
            table[key] = offsets
        return table

    def persist(self) -> bool:
        """Write the offsets if anything changed since the last write; True when a file was written."""
        with self._persist_lock:
            with self._lock:
                changes = self._changes
                if changes == self._persisted_changes:
                    return False
                snapshot = {
                    key: {str(queue_id): offset for queue_id, offset in sorted(self._table[key].items())}
                    for key in sorted(self._table)
                }
            # Written outside _lock so commits go on during the fsync; a commit made meanwhile raises _changes
            # past `changes` and is written by the next persist.
            write_json(self.path, {TABLE_KEY: snapshot})
            self._persisted_changes = changes
            return True

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """Record that `group` will next read `offset` from `queue_id` of `topic`."""
        _check_position(group, topic, queue_id, offset)
        key = f"{topic}{SEPARATOR}{group}"
        with self._lock:
            queues = self._table.get(key)
            if queues is None:
                # Names are checked once, when the pair first appears, to keep the commit path cheap.
                _check_names(group, topic)
                queues = self._table[key] = {}
            previous = queues.get(queue_id)
            if previous == offset:
                return
            queues[queue_id] = offset
            self._changes += 1
        if previous is not None and offset < previous:
            # Not refused (RocketMQ accepts it too): after a rebalance the previous owner of a queue may commit
            # late, and a reset moves offsets back on purpose. Logged because it means messages are read again.
            log.debug(
                "group %r moved its offset of %s queue %d back from %d to %d", group, topic, queue_id, previous, offset
            )

    def query_offset(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or NO_OFFSET (-1) when the group never committed one for this queue."""
        with self._lock:
            queues = self._table.get(f"{topic}{SEPARATOR}{group}")
            if queues is None:
                return NO_OFFSET
            return queues.get(queue_id, NO_OFFSET)

    def offsets_of(self, group: str, topic: str) -> dict[int, int]:
        """A copy of the group's offsets in `topic`, by queue id; empty when there are none."""
        with self._lock:
            return dict(self._table.get(f"{topic}{SEPARATOR}{group}", {}))

    def groups(self) -> set[str]:
        """Every group with a committed offset somewhere."""
        with self._lock:
            return {key.partition(SEPARATOR)[2] for key in self._table}

    def topics_of(self, group: str) -> list[str]:
        """The topics (and light queues) `group` has committed offsets in, sorted."""
        with self._lock:
            keys = [key.partition(SEPARATOR) for key in self._table]
        return sorted(topic for topic, _, name in keys if name == group)

    def snapshot(self) -> list[tuple[str, str, int, int]]:
        """Every committed offset as (group, topic, queue id, offset), sorted: what a report of consumer lag reads."""
        with self._lock:
            rows = [
                (key.partition(SEPARATOR)[2], key.partition(SEPARATOR)[0], queue_id, offset)
                for key, queues in self._table.items()
                for queue_id, offset in queues.items()
            ]
        return sorted(rows)

    def reset_offsets(self, group: str, topic: str, offsets: Mapping[int, int]) -> None:
        """Set the offsets of the queues in `offsets`, all or none; queues not named keep their offsets."""
        if not offsets:
            return
        for queue_id, offset in offsets.items():
            _check_position(group, topic, queue_id, offset)
        _check_names(group, topic)
        key = f"{topic}{SEPARATOR}{group}"
        with self._lock:
            queues = self._table.setdefault(key, {})
            changed = {queue_id: offset for queue_id, offset in offsets.items() if queues.get(queue_id) != offset}
            queues.update(changed)
            if changed:
                self._changes += 1
        log.info("offsets of group %r in topic %r reset: %s", group, topic, dict(sorted(offsets.items())))

    def delete_topic(self, topic: str) -> int:
        """Forget every group's offsets in `topic`; returns the number of groups that had some."""
        with self._lock:
            doomed = [key for key in self._table if key.partition(SEPARATOR)[0] == topic]
            for key in doomed:
                del self._table[key]
            if doomed:
                self._changes += 1
        return len(doomed)

    def delete_group(self, group: str, topic: str | None = None) -> int:
        """Forget every offset of `group` (in `topic` only, if given); returns the number of topics it had offsets
        in."""
        with self._lock:
            doomed = [
                key
                for key in self._table
                if key.partition(SEPARATOR)[2] == group and (topic is None or key.partition(SEPARATOR)[0] == topic)
            ]
            for key in doomed:
                del self._table[key]
            if doomed:
                self._changes += 1
        if doomed:
            log.info("offsets of group %r deleted in %d topics", group, len(doomed))
        return len(doomed)


def _check_position(group: str, topic: str, queue_id: int, offset: int) -> None:
    if not _is_int(queue_id) or queue_id < 0:
        raise InvalidOffsetError(
            f"group {group!r}, topic {topic!r}: queue id {queue_id!r} is not valid; use an integer from 0"
        )
    if not _is_int(offset) or offset < 0:
        raise InvalidOffsetError(
            f"group {group!r}, topic {topic!r}, queue {queue_id}: offset {offset!r} is not valid; "
            "use the consume-queue index of the next message to read (0 or more)"
        )


def _check_names(group: str, topic: str) -> None:
    try:
        validate_topic(topic)
    except InvalidTopicError as exc:
        raise InvalidOffsetError(f"cannot keep an offset of group {group!r}: {exc}") from exc
    try:
        validate_group(group)
    except GroupConfigError as exc:
        raise InvalidOffsetError(f"cannot keep an offset in topic {topic!r}: {exc}") from exc
