"""Recalls (RocketMQ 5.3's RecallMessage): a delay-level or timer message not yet due is cancelled with the recall
handle its send answered (core.scheduling.recall_handle); when it comes due, its service drops it instead of moving
it to its topic. Its consumers never see it.

The table: (real topic, unique id) -> due ms, one entry for each recall answered OK whose message may still be
parked. A recall is accepted only while its due time is ahead of the broker's clock, and the services move a
message only once the clock has reached its due time (both read the one clock, on the one event loop): a recall
answered OK is never too late, and one refused as due already (NOT_PENDING) is delivered.

Durable before it is answered: each recall is appended to the recall journal (core.scheduling.recall_journal,
`recalls.jsonl`; fsynced under SYNC_FLUSH, as the store's messages), recalls arriving together in one write; the
table is read back before the services start. A service that meets a message whose recall is still being written
waits for the write: if it fails, the recall is answered with the error and the message is delivered. So a recall
answered OK holds across a restart or a crash, and a message is dropped only for a recall that was recorded.

Forgetting: an entry is kept until no service can meet its message again, even after a crash: until its due time
is before the progress both services have persisted (`settled_before`: TimerService and ScheduleService's
settled_before_ms), looked at every PRUNE_INTERVAL_S; the journal is then rewritten with the entries left. Not
when the message is dropped: a crash before the service persisted its progress would meet the message again.

Where RocketMQ differs: its recall appends a marker message (TIMER_DEL_UNIQKEY) to the timer's queue, which drops
the message when both come due in one slot; so it recalls timer messages only, not delay levels, and a marker
written while the message's slot is already being fired misses it. Like RocketMQ, the broker trusts the handle's
due time: a second recall of one message is answered OK again, a handle of a message that does not exist is
answered OK and recalls nothing, and the recall of a handle altered to a time before its message's may be
forgotten before the message is due.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Sequence

from core.errors import ConfigFileError, RecallError, RecallProblem, ServiceNotAvailableError
from core.parking import ParkingBroker
from core.scheduling.recall_handle import RecallHandle, RecallHandleError, decode_recall_handle
from core.scheduling.recall_journal import RECALL_JOURNAL_FILE, Recall, RecallJournal
from core.store.message import StoredMessage
from core.system_topics import PROPERTY_REAL_TOPIC, is_retry_topic

log = logging.getLogger(__name__)

# How often entries whose messages are past both services' persisted progress are forgotten.
PRUNE_INTERVAL_S = 60.0
# The entries kept at most. Each is about 100 bytes in memory and a line of the journal, and stays until its due
# time (up to timer_max_delay_s, 30 days); past this a recall is refused rather than let a client that recalls
# made-up handles grow the table without end.
MAX_RECALLS = 1_000_000

Key = tuple[str, str]  # real topic, unique id


class RecallTable:
    def __init__(self, broker: ParkingBroker, broker_name: str, max_ahead_ms: int) -> None:
        """`max_ahead_ms`: the furthest due time a message can have (the longest timer or delay level); a handle
        further ahead was not made by this broker."""
        self._broker = broker
        self._broker_name = broker_name
        self._max_ahead_ms = max_ahead_ms
        self._journal = RecallJournal(broker.config_dir / RECALL_JOURNAL_FILE, durable=broker.store.sync_flush)
        self._entries: dict[Key, int] = {}
        # Recalls being written: a service that meets their message waits for the outcome.
        self._writing: dict[Key, asyncio.Future[None]] = {}
        self._unwritten: list[tuple[Recall, int | None, asyncio.Future[None]]] = []
        # What the journal holds (recalls whose write returned), which a rewrite writes again.
        self._on_disk: dict[Key, int] = {}
        self._writer: asyncio.Task[None] | None = None
        self._io = asyncio.Lock()
        self._pruner: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    # --- handles -----------------------------------------------------------------------------------------

    def handle_for(self, topic: str, unique_id: str, due_ms: int) -> str:
        """The recall handle of a message parked until `due_ms`, or "" for one that cannot be recalled (RocketMQ
        gives none for a retry of a consumer group; or the fields do not fit a handle)."""
        if is_retry_topic(topic):
            return ""
        try:
            return RecallHandle(topic, self._broker_name, due_ms, unique_id).encode()
        except ValueError:
            return ""

    # --- recalling ---------------------------------------------------------------------------------------

    async def recall(self, topic: str, handle: str) -> str:
        """Recall the message of `handle`, sent to `topic`; its unique id once the recall is recorded.
        RecallError says why a handle is refused; ConfigFileError that the journal could not be written (nothing
        was recalled then)."""
        try:
            fields = decode_recall_handle(handle)
        except RecallHandleError as exc:
            raise RecallError(RecallProblem.MALFORMED, f"recall failed: {exc}") from exc
        if fields.topic != topic:
            raise RecallError(
                RecallProblem.OTHER_TOPIC,
                f"recall failed: the handle is of a message of topic {fields.topic!r}, not {topic!r}; recall it"
                " with the topic it was sent to",
            )
        if fields.broker_name != self._broker_name:
            raise RecallError(
                RecallProblem.OTHER_BROKER,
                f"recall failed: the handle was issued by broker {fields.broker_name!r}; this is {self._broker_name!r}",
            )
        key = (topic, fields.unique_id)
        while (writing := self._writing.get(key)) is not None:  # another recall of the message is being written
            with contextlib.suppress(ConfigFileError):
                await asyncio.shield(writing)
        # From here to the entry's insertion nothing awaits: a service moving the message has seen the clock past
        # its due time first, or meets the entry.
        now = self._broker.clock.now_ms()
        if fields.due_ms <= now:
            raise RecallError(
                RecallProblem.NOT_PENDING,
                f"recall failed: message {fields.unique_id} of topic {topic!r} was due at {fields.due_ms} ms, now"
                " is past it; it has been or is being delivered",
            )
        if fields.due_ms - now > self._max_ahead_ms:
            raise RecallError(
                RecallProblem.NOT_PENDING,
                f"recall failed: the handle's time {fields.due_ms} is further ahead than any message can wait"
                f" ({self._max_ahead_ms // 1000} s)",
            )
        known = self._entries.get(key)
        if known is not None and known >= fields.due_ms:
            return fields.unique_id  # recalled already, and recorded: as RocketMQ, a second recall is OK
        if known is None and len(self._entries) >= MAX_RECALLS:
            raise ServiceNotAvailableError(
                f"recall failed: {MAX_RECALLS} recalls are waiting for their messages' due time; try again later"
            )
        # In the table at once, so that a service meeting the message from now on waits for the outcome.
        self._entries[key] = fields.due_ms
        loop = asyncio.get_running_loop()
        written = self._writing[key] = loop.create_future()
        self._unwritten.append(((topic, fields.unique_id, fields.due_ms), known, written))
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._write_unwritten())
        # Shielded: the writer settles the outcome, whether or not this caller is still there to hear it.
        await asyncio.shield(written)
        log.info("recalled message %s of topic %r, due at %d", fields.unique_id, topic, fields.due_ms)
        return fields.unique_id

    async def _write_unwritten(self) -> None:
        """Write the recalls waiting, in groups (those that arrive during a write go in the next), and settle each:
        recorded, or taken back out of the table with the error for its caller."""
        while self._unwritten:
            batch, self._unwritten = self._unwritten, []
            async with self._io:
                try:
                    await asyncio.to_thread(self._journal.append, [recall for recall, _, _ in batch])
                except ConfigFileError as exc:
                    log.error("recalls: %d not recorded: %s", len(batch), exc)
                    failed: ConfigFileError | None = exc
                else:
                    failed = None
            for (topic, unique_id, due_ms), known, written in batch:
                key = (topic, unique_id)
                if failed is None:
                    self._on_disk[key] = due_ms
                    written.set_result(None)
                else:
                    if known is None:
                        self._entries.pop(key, None)
                    else:
                        self._entries[key] = known
                    written.set_exception(failed)
                    written.exception()  # retrieved: its caller may have gone away
                del self._writing[key]

    # --- what the services ask ---------------------------------------------------------------------------

    async def recalled(self, parked: Sequence[StoredMessage]) -> list[bool]:
        """For each parked message about to be moved, whether it was recalled (waiting for recalls being written).
        The caller drops those, moves the others."""
        entries = self._entries
        if not entries:
            return [False] * len(parked)
        flags = []
        for message in parked:
            key = (message.properties.get(PROPERTY_REAL_TOPIC, message.topic), message.unique_id or "")
            if key in entries:
                writing = self._writing.get(key)
                if writing is not None:
                    with contextlib.suppress(ConfigFileError):  # not recorded: taken back out of the table
                        await asyncio.shield(writing)
                flags.append(key in entries)
            else:
                flags.append(False)
        return flags

    # --- running -----------------------------------------------------------------------------------------

    def load(self) -> None:
        """Read the journal (before the services start moving messages) and write it again without its torn tail
        or the lines that repeat a recall."""
        for topic, unique_id, due_ms in self._journal.read():
            key = (topic, unique_id)
            self._entries[key] = max(due_ms, self._entries.get(key, 0))
        self._on_disk = dict(self._entries)
        self._journal.rewrite(self._recalls())
        if self._entries:
            log.info("recalls: %d messages recalled and not yet due", len(self._entries))

    def start(self, settled_before: Callable[[], int]) -> None:
        """Forget, every PRUNE_INTERVAL_S, the entries due before `settled_before()` (ms): the time before which
        every parked message has been moved or dropped, by the progress the services persisted."""
        self._pruner = asyncio.get_running_loop().create_task(self._prune_periodically(settled_before))

    async def close(self) -> None:
        if self._pruner is not None:
            self._pruner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._pruner
            self._pruner = None
        if self._writer is not None:
            await asyncio.gather(self._writer, return_exceptions=True)

    async def prune(self, settled_before_ms: int) -> int:
        """Forget the entries due before `settled_before_ms` and rewrite the journal; how many were forgotten."""
        gone = [key for key, due in self._entries.items() if due < settled_before_ms and key not in self._writing]
        if not gone:
            return 0
        for key in gone:
            del self._entries[key]
            self._on_disk.pop(key, None)
        async with self._io:
            # What the journal holds once no append runs: a recall written meanwhile is in it, one waiting to be
            # written is appended after this rewrite.
            await asyncio.to_thread(self._journal.rewrite, self._recalls())
        log.info("recalls: %d forgotten (their messages are past), %d kept", len(gone), len(self._entries))
        return len(gone)

    async def _prune_periodically(self, settled_before: Callable[[], int]) -> None:
        while True:
            await asyncio.sleep(PRUNE_INTERVAL_S)
            try:
                await self.prune(settled_before())
            except ConfigFileError:
                log.exception("recalls: the journal was not rewritten; trying again in %.0f s", PRUNE_INTERVAL_S)

    def _recalls(self) -> list[Recall]:
        return [(topic, unique_id, due) for (topic, unique_id), due in self._on_disk.items()]


__all__ = ["MAX_RECALLS", "PRUNE_INTERVAL_S", "RecallTable"]
