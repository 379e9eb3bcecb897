"""Delay levels (RocketMQ's ScheduleMessageService): a message sent with the property DELAY=n waits the n-th
level's time (`BrokerConfig.message_delay_level`, "1s 5s 10s 30s 1m 2m ... 1h 2h") before its consumers see it.

Parking: the message is stored in SCHEDULE_TOPIC, in the queue of its level (level n in queue n - 1), with its
real topic and queue in REAL_TOPIC and REAL_QID and its due time (ms) as the tag code of its consume-queue entry,
as RocketMQ keeps it. Within one level every message waits as long, so each queue is due in order.

Moving: one task per level reads its queue from the level's offset, waits until the head is due, stores a copy
in the real topic (core.moves) and moves the offset on; a message recalled before it was due
(core.scheduling.recalls) is dropped instead. The offsets are persisted in `delayOffset.json`
(RocketMQ's file: {"offsetTable": {"1": 17, ...}}) every second and at close. After a crash, the messages from
the persisted offset on may have been moved already: each is looked for in its real topic (core.moves.
already_moved) until the first that was not, so a restart neither loses nor repeats a delayed message.

A copy that cannot be stored is retried every second while the store refuses writes; one its topic no longer
takes (deleted, not writable, too large) is logged and skipped, so one message does not hold back its level.
"""

from __future__ import annotations

import asyncio
import logging
import re
from typing import Protocol

from core.errors import ConfigFileError, CoreError, IllegalMessageError, ServiceNotAvailableError
from core.moves import already_moved, moved_copy, read_parked, store_copies
from core.parking import ParkingBroker
from core.scheduling.recalls import RecallTable
from core.store.message import PROPERTY_TAG_CODE, Message, StoredMessage
from core.store.message_store import PutResult
from core.system_topics import (
    PROPERTY_DELAY_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    SCHEDULE_TOPIC,
)
from core.tables.json_file import read_json, write_json
from core.tables.topic_config import Perm, TopicConfig

log = logging.getLogger(__name__)

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
DELAY_OFFSET_FILE = "delayOffset.json"
_UNIT_MS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"([1-9][0-9]{0,8})([smhd])")
# Entries read per round, and how often progress is written.
READ_BATCH = 256
PERSIST_INTERVAL_S = 1.0
# Waits while the store refuses writes (RocketMQ's DELAY_FOR_A_PERIOD is 10 s; a second loses less time).
STORE_REFUSED_PAUSE_S = 1.0
# How long a level with nothing parked waits for a message before looking again (a new one wakes it at once).
IDLE_WAIT_S = 5.0
# Within a level due times follow the order of the queue, as long as the clock does not step back by more than this;
# recalls of messages due that close to a level's persisted progress are kept (core.moves allows the same).
SETTLED_SLACK_MS = 60_000


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """The levels of `message_delay_level` in milliseconds, level 1 first; ValueError saying which is wrong."""
    if not isinstance(text, str) or not text.split():
        raise ValueError(f"message_delay_level {text!r}: give one or more levels, as {DEFAULT_DELAY_LEVELS!r}")
    levels = []
    for number, level in enumerate(text.split(), 1):
        match = _LEVEL.fullmatch(level)
        if match is None:
            raise ValueError(
                f"message_delay_level: level {number} is {level!r}; a level is a positive number and a unit"
                " (s, m, h or d), as '10s' or '2h'"
            )
        levels.append(int(match.group(1)) * _UNIT_MS[match.group(2)])
    return tuple(levels)


class ScheduleBroker(ParkingBroker, Protocol):
    """The broker as the delay levels see it (core.broker.Broker is one): a parking service's needs, and the level
    queues read by position."""

    def topic_config(self, topic: str) -> TopicConfig: ...

    def queue_entries(self, topic: str, queue_id: int, offset: int, max_count: int) -> list[tuple[int, int, int]]: ...

    async def wait_for_message(self, topic: str, queue_id: int, offset: int, timeout_s: float) -> bool: ...


class ScheduleService:
    def __init__(self, broker: ScheduleBroker, message_delay_level: str, recalls: RecallTable) -> None:
        """`message_delay_level`: the levels, as BrokerConfig.message_delay_level has them; `recalls`: the messages
        to drop when they are due."""
        self._broker = broker
        self._recalls = recalls
        self._levels_text = message_delay_level
        self.levels_ms = parse_delay_levels(message_delay_level)
        self._path = broker.config_dir / DELAY_OFFSET_FILE
        self._offsets: dict[int, int] = {}  # level -> offset of the next message of its queue to move
        self._persisted: dict[int, int] = {}
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def max_level(self) -> int:
        return len(self.levels_ms)

    def offsets(self) -> dict[int, int]:
        """Per level, the offset in its queue of the next message to move."""
        return dict(self._offsets)

    def take_master_offsets(self, offsets: dict[int, int]) -> None:
        """A slave's copy of its master's progress (the service does not run on a slave): persisted as the master's
        own, for the day this broker moves the messages itself."""
        self._offsets = dict(offsets)
        self.persist()

    # --- parking -----------------------------------------------------------------------------------------

    def park(self, message: Message) -> bool:
        properties = message.properties
        value = properties[PROPERTY_DELAY_LEVEL]
        level = int(value) if value.isascii() and value.isdigit() else -1
        if level == 0:  # RocketMQ: a level of 0 or less means no delay
            del properties[PROPERTY_DELAY_LEVEL]
            return False
        if not 0 < level <= self.max_level:
            raise IllegalMessageError(
                f"topic {message.topic!r}: delay level {value!r} does not exist; levels go from 1 to"
                f" {self.max_level} ({self._levels_text}), 0 for none"
            )
        due = self._broker.clock.now_ms() + self.levels_ms[level - 1]
        properties[PROPERTY_REAL_TOPIC] = message.topic
        properties[PROPERTY_REAL_QUEUE_ID] = str(message.queue_id)
        properties[PROPERTY_TAG_CODE] = str(due)
        message.topic = SCHEDULE_TOPIC
        message.queue_id = level - 1
        return True

    def parked(self, message: Message, put: PutResult) -> None:
        """Nothing to do: the level's task waits for new messages in its queue itself."""

    def recall_due_ms(self, message: Message) -> int | None:
        return int(message.properties[PROPERTY_TAG_CODE])

    def settled_before_ms(self) -> int:
        """A time before which no message of any level is due that a restart from the persisted offsets would meet:
        the due time of the first message at each level's persisted offset (the later ones are due later), or now
        for a level with nothing waiting (a message parked from now on is due later)."""
        broker = self._broker
        settled = broker.clock.now_ms()
        for level in range(1, self.max_level + 1):
            queue_id = level - 1
            offset = self._persisted.get(level, broker.store.min_offset(SCHEDULE_TOPIC, queue_id))
            entries = broker.queue_entries(SCHEDULE_TOPIC, queue_id, offset, 1)
            if entries:
                settled = min(settled, entries[0][2])
        return max(0, settled - SETTLED_SLACK_MS)

    # --- running -----------------------------------------------------------------------------------------

    async def start(self) -> None:
        broker = self._broker
        if not broker.has_topic(SCHEDULE_TOPIC) or broker.topic_config(SCHEDULE_TOPIC).read_queue_nums < self.max_level:
            broker.create_topic(SCHEDULE_TOPIC, queue_nums=self.max_level, perm=Perm.READ | Perm.WRITE)
        self._offsets = self._load()
        self._persisted = dict(self._offsets)
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._run_level(level)) for level in range(1, self.max_level + 1)]
        self._tasks.append(loop.create_task(self._persist_loop()))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []
        self.persist()

    def _load(self) -> dict[int, int]:
        data = read_json(self._path)
        if data is None:
            return {}
        table = data.get("offsetTable") if isinstance(data, dict) else None
        if not isinstance(table, dict) or not all(
            isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0 and str(level).isdigit()
            for level, offset in table.items()
        ):
            raise ConfigFileError(
                self._path, 'must hold {"offsetTable": {"<level>": <offset>, ...}}', hint="restore it from .bak"
            )
        return {int(level): offset for level, offset in table.items()}

    def persist(self) -> None:
        if self._offsets == self._persisted:
            return
        offsets = dict(self._offsets)
        write_json(
            self._path,
            {"offsetTable": {str(level): offset for level, offset in sorted(offsets.items())}},
            durable=self._broker.store.sync_flush,
        )
        self._persisted = offsets

    async def _persist_loop(self) -> None:
        while True:
            await asyncio.sleep(PERSIST_INTERVAL_S)
            try:
                self.persist()
            except ConfigFileError:
                log.exception("delay levels: progress not persisted; will try again")

    async def _run_level(self, level: int) -> None:
        while True:
            try:
                await self._move_level(level)
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bug, not bad input: log it and carry on from the level's offset rather than stop the level.
                log.exception("delay level %d: moving failed; starting again in a second", level)
                await asyncio.sleep(STORE_REFUSED_PAUSE_S)

    async def _move_level(self, level: int) -> None:
        broker = self._broker
        store = broker.store
        clock = broker.clock
        queue_id = level - 1
        offset = self._offsets.get(level, store.min_offset(SCHEDULE_TOPIC, queue_id))
        # Messages from the persisted offset on may have been moved before a crash: look for each one's copy
        # until the first that has none (they were moved in order).
        in_doubt = True
        while True:
            low = store.min_offset(SCHEDULE_TOPIC, queue_id)
            if offset < low:
                log.error("delay level %d: offsets %d to %d were removed by retention unmoved", level, offset, low)
                offset = self._offsets[level] = low
            entries = broker.queue_entries(SCHEDULE_TOPIC, queue_id, offset, READ_BATCH)
            if not entries:
                await broker.wait_for_message(SCHEDULE_TOPIC, queue_id, offset, IDLE_WAIT_S)
                continue
            now = clock.now_ms()
            due: list[StoredMessage] = []
            holes = 0
            for commit_log_offset, size, due_ms in entries:
                if size and due_ms > now:
                    break
                record = read_parked(store, (commit_log_offset,), f"delay level {level}") if size else []
                if not record:  # a hole, or a record lost: nothing to move
                    if due:
                        break
                    holes += 1
                    continue
                due.extend(record)
            if holes:
                offset = self._offsets[level] = offset + holes
                continue
            if not due:
                await clock.sleep_until(entries[0][2])
                continue
            if in_doubt:
                while due and already_moved(store, due[0], due[0].properties.get(PROPERTY_REAL_TOPIC, "")):
                    due.pop(0)
                    offset = self._offsets[level] = offset + 1
                if not due:
                    continue
                in_doubt = False
            recalled = await self._recalls.recalled(due)
            copies = [
                moved_copy(parked, drop=(PROPERTY_DELAY_LEVEL,))
                for parked, dropped in zip(due, recalled, strict=True)
                if not dropped
            ]
            outcomes = iter(await store_copies(broker, copies) if copies else [])
            # In queue order, the recalled ones among them: the offset moves past each message dropped or stored.
            for parked, dropped in zip(due, recalled, strict=True):
                if dropped:
                    log.info(
                        "delay level %d: message %s for topic %r was recalled; dropped",
                        level,
                        parked.unique_id,
                        parked.properties.get(PROPERTY_REAL_TOPIC),
                    )
                else:
                    outcome = next(outcomes)
                    if isinstance(outcome, ServiceNotAvailableError):
                        log.warning("delay level %d: the store refuses writes (%s); trying again", level, outcome)
                        await asyncio.sleep(STORE_REFUSED_PAUSE_S)
                        break
                    if isinstance(outcome, CoreError):
                        log.error(
                            "delay level %d: message %s for topic %r could not be stored and is dropped: %s",
                            level,
                            parked.unique_id,
                            parked.properties.get(PROPERTY_REAL_TOPIC),
                            outcome,
                        )
                offset = self._offsets[level] = offset + 1


__all__ = ["DEFAULT_DELAY_LEVELS", "ScheduleService", "parse_delay_levels"]
