"""Timer messages (RocketMQ 5's TimerMessageStore): a message with TIMER_DELIVER_MS (ms since the epoch),
TIMER_DELAY_SEC or TIMER_DELAY_MS reaches its topic at that time, to the millisecond (never early, at most one
tick late), up to `BrokerConfig.timer_max_delay_s` ahead (30 days by default; RocketMQ stops at 3).

Parking: the message is stored in TIMER_TOPIC (queue 0), its real topic and queue in REAL_TOPIC and REAL_QID, its due
time normalised into TIMER_DELIVER_MS, and the second the wheel looks at it as the tag code of its consume-queue entry
(core.store.message.PROPERTY_TAG_CODE). The wheel (core.scheduling.timer_wheel) holds pending entries by that second, in
memory.

Long horizons: a message due more than `timer_roll_window_s` (1 day) ahead is looked at after the window and
stored again (rolled: TIMER_ROLL_TIMES counts it) with the rest of its wait, so no parked record outlives the
store's retention and a restart reads at most a window of the timer queue: a 30-day timer costs 30 appends.

Firing: when a second is due, its records are read, ordered by due time and stored in their topics as each
becomes due (core.moves); the progress, `timerCheckpoint.json` ({"firedThroughS": T, "scanFromOffset": n}), is
written after each second: every second up to T has been fired, and nothing pending lies before offset n of the
timer queue. A restart rebuilds the wheel from the queue's entries from n on whose second is after T, reading
no record. After a crash, the second that was firing may have been moved in part: its messages are looked for in
their topics (core.moves.already_moved) before they are moved. A message recalled before it was due
(core.scheduling.recalls) is dropped when it comes due instead of moved.
"""

from __future__ import annotations

import asyncio
import logging

from core.broker_config import BrokerConfig
from core.errors import ConfigFileError, CoreError, IllegalMessageError, ServiceNotAvailableError, from_store_error
from core.moves import already_moved, moved_copy, read_parked, store_copies
from core.parking import ParkingBroker
from core.scheduling.recalls import RecallTable
from core.scheduling.timer_wheel import TimerWheel
from core.store.errors import StoreError
from core.store.message import PROPERTY_TAG_CODE, Message, StoredMessage
from core.store.message_store import PutResult
from core.system_topics import (
    PROPERTY_MOVED_FROM,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_TIMER_ROLL_TIMES,
    TIMER_PROPERTIES,
    TIMER_TOPIC,
)
from core.tables.json_file import read_json, write_json
from core.tables.topic_config import Perm

log = logging.getLogger(__name__)

TIMER_CHECKPOINT_FILE = "timerCheckpoint.json"
# Timer-queue entries read per call while rebuilding the wheel.
REBUILD_BATCH = 4096
# Copies stored per call while a second fires.
FIRE_BATCH = 512
STORE_REFUSED_PAUSE_S = 1.0
# A clock stepped back (or a second pushed late) puts a message at most this far before the second the wheel holds it
# in; recalls of messages due that close to the fired seconds are kept (core.moves allows a store clock as much).
SETTLED_SLACK_MS = 60_000


class TimerService:
    def __init__(self, broker: ParkingBroker, config: BrokerConfig, recalls: RecallTable) -> None:
        self._broker = broker
        self._recalls = recalls
        self.max_delay_ms = config.timer_max_delay_s * 1000
        # At most half the store's retention, so a parked record is always still there when it is looked at.
        retention_s = int(broker.store.config.file_reserved_hours * 3600)
        self.roll_window_s = max(1, min(config.timer_roll_window_s, retention_s // 2))
        self._path = broker.config_dir / TIMER_CHECKPOINT_FILE
        self.wheel = TimerWheel(fired_through=broker.clock.now_ms() // 1000)
        # The progress a restart would find (timerCheckpoint.json's firedThroughS); none before the start.
        self._persisted_through = 0
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._second_taken: int | None = None
        # Records appended before this start may have been moved by the run that crashed (see _fire).
        self._doubt_below = 0

    # --- parking -----------------------------------------------------------------------------------------

    def park(self, message: Message) -> bool:
        properties = message.properties
        given = [name for name in TIMER_PROPERTIES if name in properties]
        if len(given) > 1:
            raise IllegalMessageError(
                f"topic {message.topic!r}: a timer message names its time once; it has {', '.join(given)}"
            )
        name = given[0]
        value = properties[name]
        if not value.isdigit() or not value.isascii():
            raise IllegalMessageError(
                f"topic {message.topic!r}: {name} must be a non-negative integer"
                f" ({'ms since the epoch' if name == PROPERTY_TIMER_DELIVER_MS else 'a delay'}), not {value[:40]!r}"
            )
        now = self._broker.clock.now_ms()
        number = int(value)
        due = (
            number
            if name == PROPERTY_TIMER_DELIVER_MS
            else now + number * (1000 if name == PROPERTY_TIMER_DELAY_SEC else 1)
        )
        if due - now > self.max_delay_ms:
            raise IllegalMessageError(
                f"topic {message.topic!r}: timer message due in {(due - now) / 1000:.0f} s; at most"
                f" {self.max_delay_ms // 1000} s ahead (timer_max_delay_s)"
            )
        properties.pop(PROPERTY_TIMER_DELAY_SEC, None)
        properties.pop(PROPERTY_TIMER_DELAY_MS, None)
        properties[PROPERTY_TIMER_DELIVER_MS] = str(due)
        if due <= now:
            return False  # due already: stored at once, as RocketMQ does
        properties[PROPERTY_REAL_TOPIC] = message.topic
        properties[PROPERTY_REAL_QUEUE_ID] = str(message.queue_id)
        self._set_second(message, due, now)
        message.topic = TIMER_TOPIC
        message.queue_id = 0
        return True

    def recall_due_ms(self, message: Message) -> int | None:
        return int(message.properties[PROPERTY_TIMER_DELIVER_MS])

    def settled_before_ms(self) -> int:
        """A time before which no message is due that the wheel holds or is firing, or would hold after a restart
        from the persisted progress. A message is parked in the second it is due or, when that second is under way,
        the next (or earlier, to roll): the messages of a second are due at most a second before it. A message
        parked from now on is due later than now."""
        wheel = self.wheel
        settled = self._broker.clock.now_ms()
        for second in (wheel.next_second(), wheel.firing):
            if second is not None:
                settled = min(settled, (second - 1) * 1000)
        if self._persisted_through < wheel.fired_through:  # seconds a restart would fire again
            settled = min(settled, self._persisted_through * 1000)
        return max(0, settled - SETTLED_SLACK_MS)

    def _set_second(self, message: Message, due: int, now: int) -> None:
        second = max(min(due // 1000, now // 1000 + self.roll_window_s), self.wheel.earliest)
        message.properties[PROPERTY_TAG_CODE] = str(second * 1000)

    def parked(self, message: Message, put: PutResult) -> None:
        second = int(message.properties[PROPERTY_TAG_CODE]) // 1000
        self.wheel.add(second, put.commit_log_offset, put.queue_offset)
        if self.wheel.next_second() == second:
            self._wake.set()

    # --- running -----------------------------------------------------------------------------------------

    async def start(self) -> None:
        broker = self._broker
        if not broker.has_topic(TIMER_TOPIC):
            broker.create_topic(TIMER_TOPIC, queue_nums=1, perm=Perm.READ | Perm.WRITE)
        self._doubt_below = broker.store.end_offset
        checkpoint = self._load()
        if checkpoint is not None:
            fired_through, scan_from = checkpoint
            self.wheel = TimerWheel(fired_through)
            self._persisted_through = fired_through
            self._rebuild(scan_from)
        else:
            if broker.store.max_offset(TIMER_TOPIC, 0) > 0:
                log.warning("timer: %s is missing; timer messages parked before now are not fired", self._path)
            self.persist()  # from now on a crash finds the wheel's progress
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self.wheel.firing is None:
            self.persist()

    def _load(self) -> tuple[int, int] | None:
        data = read_json(self._path)
        if data is None:
            return None
        fired = data.get("firedThroughS") if isinstance(data, dict) else None
        scan = data.get("scanFromOffset") if isinstance(data, dict) else None
        if not all(isinstance(value, int) and not isinstance(value, bool) and value >= 0 for value in (fired, scan)):
            raise ConfigFileError(
                self._path, 'must hold {"firedThroughS": <s>, "scanFromOffset": <offset>}', hint="restore it from .bak"
            )
        return fired, scan  # type: ignore[return-value]

    def _rebuild(self, scan_from: int) -> None:
        store = self._broker.store
        low = store.min_offset(TIMER_TOPIC, 0)
        if scan_from < low:
            log.error("timer: queue offsets %d to %d were removed by retention before they fired", scan_from, low)
        offset = max(scan_from, low)
        end = store.max_offset(TIMER_TOPIC, 0)
        fired_through = self.wheel.fired_through
        while offset < end:
            entries = store.queue_entries(TIMER_TOPIC, 0, offset, REBUILD_BATCH)
            if not entries:
                break
            for commit_log_offset, size, code in entries:
                second = code // 1000
                if size and second > fired_through:
                    self.wheel.add(second, commit_log_offset, offset)
                offset += 1
        log.info("timer: %d messages pending after a restart, fired through %d", len(self.wheel), fired_through)

    def progress(self) -> dict[str, int]:
        """timerCheckpoint.json's content now: every second up to firedThroughS fired, nothing pending before
        scanFromOffset of the timer queue."""
        fired_through = self.wheel.fired_through
        return {
            "firedThroughS": fired_through,
            "scanFromOffset": self.wheel.low_water(self._broker.store.max_offset(TIMER_TOPIC, 0)),
        }

    def persist(self) -> None:
        progress = self.progress()
        write_json(self._path, progress, durable=self._broker.store.sync_flush)
        self._persisted_through = progress["firedThroughS"]

    def take_master_progress(self, progress: dict[str, int]) -> None:
        """A slave keeps its master's progress as its own (the service does not run on a slave): elected master,
        it rebuilds the wheel from there, and the seconds fired since are looked for before they fire again
        (core.moves.already_moved)."""
        fired, scan = progress.get("firedThroughS"), progress.get("scanFromOffset")
        if not isinstance(fired, int) or not isinstance(scan, int) or fired < 0 or scan < 0:
            raise ValueError(f"timer progress {progress!r}: expected firedThroughS and scanFromOffset, 0 or more")
        write_json(self._path, {"firedThroughS": fired, "scanFromOffset": scan}, durable=self._broker.store.sync_flush)

    async def _run(self) -> None:
        clock = self._broker.clock
        while True:
            second = self.wheel.next_second()
            if second is None:
                self._wake.clear()
                await self._wake.wait()
                continue
            if clock.now_ms() < second * 1000:
                self._wake.clear()
                await clock.sleep_until(second * 1000, self._wake)
                continue
            offsets = self.wheel.take(second)
            try:
                await self._fire(second, offsets)
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bug, not bad input: keep firing the other seconds; this one's messages wait for a restart.
                log.exception("timer: firing second %d failed", second)
            self.wheel.done(second)
            try:
                self.persist()
            except ConfigFileError:
                log.exception("timer: progress not persisted; will try again after the next second")

    async def _fire(self, second: int, offsets: list[int]) -> None:
        broker = self._broker
        store = broker.store
        clock = broker.clock
        parked = sorted(
            read_parked(store, offsets, "timer"),
            key=lambda message: int(message.properties.get(PROPERTY_TIMER_DELIVER_MS, "0")),
        )
        if self._doubt_below and offsets and min(offsets) < self._doubt_below:
            parked = self._not_yet_moved(parked)
        start = 0
        while start < len(parked):
            now = clock.now_ms()
            due_ms = int(parked[start].properties.get(PROPERTY_TIMER_DELIVER_MS, "0"))
            if due_ms > now and due_ms // 1000 == second:
                await clock.sleep_until(due_ms)
                continue
            end = start
            while end < len(parked) and end - start < FIRE_BATCH:
                due_ms = int(parked[end].properties.get(PROPERTY_TIMER_DELIVER_MS, "0"))
                if due_ms > now and due_ms // 1000 == second:
                    break
                end += 1
            batch = parked[start:end]
            rolls = [message for message in batch if int(message.properties[PROPERTY_TIMER_DELIVER_MS]) > now]
            due = [message for message in batch if int(message.properties[PROPERTY_TIMER_DELIVER_MS]) <= now]
            for message in rolls:
                await self._roll(message, now)
            await self._move(due, now)
            start = end

    def _not_yet_moved(self, parked: list[StoredMessage]) -> list[StoredMessage]:
        """The messages of a second the crashed run may have fired in part, without those it had moved or rolled.
        Once a second is found not wholly moved, later seconds were not touched: doubt ends there."""
        left = []
        for message in parked:
            if message.commit_log_offset >= self._doubt_below:
                left.append(message)
                continue
            rolled = int(message.properties[PROPERTY_TIMER_DELIVER_MS]) // 1000 > message_second(message)
            topic = TIMER_TOPIC if rolled else message.properties.get(PROPERTY_REAL_TOPIC, "")
            if not already_moved(self._broker.store, message, topic):
                left.append(message)
        if any(message.commit_log_offset < self._doubt_below for message in left):
            self._doubt_below = 0
        return left

    async def _move(self, due: list[StoredMessage], now: int) -> None:
        drop = (PROPERTY_TIMER_DELAY_SEC, PROPERTY_TIMER_DELAY_MS, PROPERTY_TIMER_ROLL_TIMES)
        copies = []
        recalled = await self._recalls.recalled(due)
        for message, dropped in zip(due, recalled, strict=True):
            if dropped:
                log.info("timer: message %s for topic %r was recalled; dropped", message.unique_id, real_topic(message))
                continue
            copy = moved_copy(message, drop=drop)
            copy.properties[PROPERTY_TIMER_OUT_MS] = str(now)
            copies.append(copy)
        while copies:
            outcomes = await store_copies(self._broker, copies)
            refused = [
                copy
                for copy, outcome in zip(copies, outcomes, strict=True)
                if isinstance(outcome, ServiceNotAvailableError)
            ]
            for copy, outcome in zip(copies, outcomes, strict=True):
                if isinstance(outcome, CoreError) and not isinstance(outcome, ServiceNotAvailableError):
                    log.error(
                        "timer: message %s for topic %r could not be stored and is dropped: %s",
                        copy.unique_id,
                        copy.topic,
                        outcome,
                    )
            if refused:
                log.warning("timer: the store refuses writes; %d due messages wait", len(refused))
                await asyncio.sleep(STORE_REFUSED_PAUSE_S)
            copies = refused

    async def _roll(self, parked: StoredMessage, now: int) -> None:
        """Store a message due beyond the window again, looked at after the next window."""
        copy = moved_copy(parked)
        properties = copy.properties
        properties[PROPERTY_REAL_TOPIC] = parked.properties[PROPERTY_REAL_TOPIC]
        properties[PROPERTY_REAL_QUEUE_ID] = parked.properties[PROPERTY_REAL_QUEUE_ID]
        properties[PROPERTY_TIMER_ROLL_TIMES] = str(int(parked.properties.get(PROPERTY_TIMER_ROLL_TIMES, "0")) + 1)
        properties[PROPERTY_MOVED_FROM] = str(parked.commit_log_offset)
        self._set_second(copy, int(properties[PROPERTY_TIMER_DELIVER_MS]), now)
        copy.topic = TIMER_TOPIC
        copy.queue_id = 0
        while True:
            try:
                put = self._broker.store.append(copy)
            except StoreError as exc:
                error = from_store_error(exc)
                if not isinstance(error, ServiceNotAvailableError):
                    log.error("timer: message %s could not be rolled and is dropped: %s", copy.unique_id, error)
                    return
                await asyncio.sleep(STORE_REFUSED_PAUSE_S)
                continue
            self.parked(copy, put)
            if not await self._broker.store.wait_durable(put.end_offset):
                log.warning("timer: rolled message %s not confirmed on disk in time", copy.unique_id)
            return


def real_topic(message: StoredMessage) -> str:
    return message.properties.get(PROPERTY_REAL_TOPIC, "")


def message_second(message: StoredMessage) -> int:
    """The second the wheel looked at a parked message."""
    return int(message.properties.get(PROPERTY_TAG_CODE, "0")) // 1000
