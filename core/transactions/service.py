"""Transactional messages (RocketMQ's TransactionalMessageService, EndTransactionProcessor and
TransactionalMessageCheckService), in process.

Half messages: a message sent with TRAN_MSG=true and its producer group in PGROUP is parked in TRANS_HALF_TOPIC,
queue 0, with its real topic and queue in REAL_TOPIC and REAL_QID and the transaction-prepared sys_flag; its
consumers cannot see it. The time of its first check-back (now + `transaction_timeout_ms`, or its
CHECK_IMMUNITY_TIME_IN_SECONDS) is the tag code of its half-queue entry, so a restart finds it without reading
the record.

Ending (`end`, RocketMQ's EndTransaction): the half is named by its commit-log offset (or offset message id),
its producer group and, optionally, its half-queue offset and transaction id. Commit stores a copy in the real
topic (core.moves: TRAN_MSG cleared, the commit sys_flag, MOVED_FROM naming the half), then an op record in
TRANS_OP_HALF_TOPIC (tag "d", body the half's queue offset, as RocketMQ writes it); rollback writes the op record
only. A half is decided once: an end for a half decided already, or being decided, does nothing.

Check-back: a half still undecided at its first check time is checked with a live producer of its group
(core.transactions.checkers), then every `transaction_check_interval_ms`, `transaction_check_max` times at most;
a check counts even when the group has no live producer (RocketMQ's broker counts it before it looks for one).
After the last check the half is copied to TRANS_CHECK_MAX_TIME_TOPIC, with an op record and a WARNING line.
The answer is COMMIT or ROLLBACK (the half is ended as above), UNKNOW or None (asked again at the next check;
None also means the answer may still come through `end`, as it will from the gRPC endpoint).

Progress and restarts (core.transactions.progress): the half offset and op offset are committed offsets of
TRANS_CHECK_GROUP; a start rebuilds the undecided halves from the half and op queues from there, with their check
counts from `transactionCheck.json`, written before each round of checks goes out so that a restart neither
forgets checks made nor checks more often than RocketMQ would. A crash between a commit copy and its op record
leaves a half that looks undecided: before such a half (one stored before the start) is checked or ended, its copy
is looked for in its topic and in TRANS_CHECK_MAX_TIME_TOPIC (core.moves.already_moved), and when found the
missing op record is written instead of asking or copying again.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Protocol

from core.broker_config import BrokerConfig
from core.errors import (
    ConfigFileError,
    CoreError,
    IllegalArgumentError,
    IllegalMessageError,
    ServiceNotAvailableError,
    from_store_error,
)
from core.moves import already_moved, moved_copy, read_parked
from core.parking import ParkingBroker
from core.store.errors import CorruptRecordError, InvalidMessageIdError, StoreError
from core.store.message import (
    PROPERTY_TAG_CODE,
    SYSFLAG_TRANSACTION_COMMIT,
    SYSFLAG_TRANSACTION_MASK,
    SYSFLAG_TRANSACTION_PREPARED,
    Message,
    StoredMessage,
)
from core.store.message_id import decode_offset_msg_id
from core.store.message_store import PutResult
from core.system_topics import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED,
    TRANS_CHECK_GROUP,
    TRANS_CHECK_MAX_TIME_TOPIC,
    TRANS_HALF_TOPIC,
    TRANS_OP_HALF_TOPIC,
)
from core.tables.topic_config import Perm
from core.transactions.checkers import (
    LocalTransactionState,
    TransactionAnswer,
    TransactionCheck,
    TransactionChecker,
    TransactionCheckers,
    transaction_id_of,
)
from core.transactions.ledger import Half, TransactionLedger
from core.transactions.progress import (
    TRANSACTION_CHECK_FILE,
    load_check_times,
    op_record,
    persist_check_times,
    rebuild_ledger,
)

log = logging.getLogger(__name__)

# Rounds of checks are at least this far apart (or one check interval, if shorter): each round writes the check
# counts once, so halves falling due a few milliseconds apart share one write. RocketMQ checks once per interval.
CHECK_ROUND_SPACING_MS = 1_000
# While the store refuses writes, an op record owed is tried again this often.
STORE_REFUSED_PAUSE_S = 1.0


class TransactionBroker(ParkingBroker, Protocol):
    """The broker as transactions see it (core.broker.Broker is one): a parking service's needs, and the check
    group's committed offsets in the half and op topics, where the ledger is rebuilt from."""

    def query_offset(self, group: str, topic: str, queue_id: int) -> int: ...

    def commit_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None: ...

    async def wait_visible(self, timeout_s: float = 10.0) -> bool: ...


class TransactionService:
    def __init__(self, broker: TransactionBroker, config: BrokerConfig) -> None:
        self._broker = broker
        self.timeout_ms = config.transaction_timeout_ms
        self.interval_ms = config.transaction_check_interval_ms
        self.check_max = config.transaction_check_max
        self.checkers = TransactionCheckers()
        self.ledger = TransactionLedger(self.interval_ms)
        self._path = broker.config_dir / TRANSACTION_CHECK_FILE
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._answers: set[asyncio.Task[None]] = set()
        self._owed_ops: list[Half] = []
        self._owed_task: asyncio.Task[None] | None = None
        self._committed: tuple[int, int] | None = None
        self._started = False

    def register_checker(self, producer_group: str, checker: TransactionChecker) -> Callable[[], None]:
        """Make a live producer of `producer_group` reachable for check-backs; returns the call that unregisters it."""
        return self.checkers.register(producer_group, checker)

    # --- parking -----------------------------------------------------------------------------------------------

    def park(self, message: Message) -> bool:
        properties = message.properties
        if properties.get(PROPERTY_TRANSACTION_PREPARED, "").lower() != "true":
            del properties[PROPERTY_TRANSACTION_PREPARED]  # TRAN_MSG=false: an ordinary message
            return False
        if not properties.get(PROPERTY_PRODUCER_GROUP):
            raise IllegalMessageError(
                f"topic {message.topic!r}: a transactional message names its producer group in property"
                f" {PROPERTY_PRODUCER_GROUP}, which the broker checks back with; send it with a TransactionProducer"
            )
        first_check = self._broker.clock.now_ms() + self._immunity_ms(message)
        properties[PROPERTY_REAL_TOPIC] = message.topic
        properties[PROPERTY_REAL_QUEUE_ID] = str(message.queue_id)
        properties[PROPERTY_TAG_CODE] = str(first_check)
        message.sys_flag = (message.sys_flag & ~SYSFLAG_TRANSACTION_MASK) | SYSFLAG_TRANSACTION_PREPARED
        message.topic = TRANS_HALF_TOPIC
        message.queue_id = 0
        return True

    def _immunity_ms(self, message: Message) -> int:
        """How long after it is stored a half is first checked: CHECK_IMMUNITY_TIME_IN_SECONDS if given (-1 meaning
        the default, as RocketMQ reads it), else transaction_timeout_ms."""
        value = message.properties.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
        if value is None or value.strip() == "-1":
            return self.timeout_ms
        if not value.isascii() or not value.isdigit() or len(value) > 9:
            raise IllegalMessageError(
                f"topic {message.topic!r}: {PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS} must be a number of seconds"
                f" (0 to 999999999, or -1 for the broker's transaction_timeout_ms), not {value[:40]!r}"
            )
        return int(value) * 1000

    def recall_due_ms(self, message: Message) -> int | None:
        """None: a half waits for its producer's decision, not for a time; it cannot be recalled."""
        return None

    def parked(self, message: Message, put: PutResult) -> None:
        half = Half(put.queue_offset, put.commit_log_offset, int(message.properties[PROPERTY_TAG_CODE]))
        earliest = self.ledger.next_due()
        self.ledger.add(half)
        if earliest is None or half.first_check_ms < earliest:
            self._wake.set()

    # --- ending ------------------------------------------------------------------------------------------------

    async def end(
        self,
        producer_group: str,
        half: int | str,
        state: LocalTransactionState,
        *,
        transaction_id: str | None = None,
        queue_offset: int | None = None,
        from_check: bool = False,
    ) -> bool:
        """Commit or roll back the half message at commit-log offset `half` (an int) or offset message id `half` (a
        str), of `producer_group`; `queue_offset` (its half-queue offset) and `transaction_id` are checked when
        given. True if this call decided it; False if it did nothing: UNKNOW, or the half was decided already.

        Raises IllegalArgumentError when the arguments name no half message of the group, ServiceNotAvailableError
        when the store refuses the commit copy (the half stays undecided: end it again, or a check-back will)."""
        if state is LocalTransactionState.UNKNOW:
            if from_check:
                log.debug("transaction: producer group %r answered a check with UNKNOW", producer_group)
            return False
        record = self._read_half(half)
        properties = record.properties
        if properties.get(PROPERTY_PRODUCER_GROUP) != producer_group:
            raise IllegalArgumentError(
                f"half message at commit-log offset {record.commit_log_offset} belongs to producer group"
                f" {properties.get(PROPERTY_PRODUCER_GROUP)!r}, not {producer_group!r}; end it from its own group"
            )
        if queue_offset is not None and queue_offset != record.queue_offset:
            raise IllegalArgumentError(
                f"half message at commit-log offset {record.commit_log_offset} is at half-queue offset"
                f" {record.queue_offset}, not {queue_offset}; pass the queue_offset of its send result"
            )
        if transaction_id is not None and transaction_id not in (record.unique_id, transaction_id_of(record)):
            raise IllegalArgumentError(
                f"half message at commit-log offset {record.commit_log_offset} has transaction id"
                f" {transaction_id_of(record)!r}, not {transaction_id!r}"
            )
        decided = await self._decide(record, state)
        if decided and from_check:
            log.info("transaction: %s of half message %s decided by a check-back", state.value, record.unique_id)
        return decided

    def _read_half(self, half: int | str) -> StoredMessage:
        if isinstance(half, str):
            try:
                _, commit_log_offset = decode_offset_msg_id(half)
            except InvalidMessageIdError as exc:
                raise IllegalArgumentError(f"{exc}; name a half message by its send result's offset_msg_id") from exc
        else:
            commit_log_offset = half
        try:
            record = self._broker.store.read_message(commit_log_offset)
        except (LookupError, CorruptRecordError) as exc:
            raise IllegalArgumentError(
                f"commit-log offset {commit_log_offset} holds no message ({exc}); name a half message by its send"
                " result's commit_log_offset"
            ) from exc
        if record.topic != TRANS_HALF_TOPIC:
            raise IllegalArgumentError(
                f"commit-log offset {commit_log_offset} holds a message of topic {record.topic!r}, not a half message;"
                " name a half message by its send result's commit_log_offset"
            )
        return record

    async def _decide(self, record: StoredMessage, state: LocalTransactionState) -> bool:
        """Commit or roll back `record` once: False if it is decided already or being decided."""
        half = self.ledger.take(record.queue_offset)
        if half is None:
            log.debug("transaction: half message %s is decided already; %s ignored", record.unique_id, state.value)
            return False
        if half.in_doubt and await self._settle_doubt(half, record):
            return False  # the crash had decided it
        if state is LocalTransactionState.COMMIT_MESSAGE:
            copy = moved_copy(record, drop=(PROPERTY_TRANSACTION_PREPARED,))
            copy.sys_flag = (copy.sys_flag & ~SYSFLAG_TRANSACTION_MASK) | SYSFLAG_TRANSACTION_COMMIT
            await self._store_copy(half, copy)
        await self._write_op(half)
        return True

    async def _store_copy(self, half: Half, copy: Message) -> None:
        """Store a half's copy; if that fails, the half is undecided again, and in doubt if the copy may be stored."""
        try:
            await self._broker.store_moved(copy)
        except CoreError:
            self.ledger.restore(half)  # refused before anything was appended
            raise
        except BaseException:
            half.in_doubt = True  # cancelled while waiting for the disk: the copy is in the log
            self.ledger.restore(half)
            raise

    async def _settle_doubt(self, half: Half, record: StoredMessage, dispatched: bool = False) -> bool:
        """For a half taken while in doubt: True (and the op record written) if a crash left its copy stored.
        `dispatched`: the caller has just waited for the store to dispatch everything (already_moved asks the index)."""
        if not dispatched:
            try:
                await self._broker.wait_visible(timeout_s=60.0)
            except BaseException:
                self.ledger.restore(half)  # cancelled (a close): still undecided, still in doubt
                raise
        store = self._broker.store
        for topic, outcome in (
            (record.properties.get(PROPERTY_REAL_TOPIC, ""), "committed"),
            (TRANS_CHECK_MAX_TIME_TOPIC, "moved to " + TRANS_CHECK_MAX_TIME_TOPIC),
        ):
            if already_moved(store, record, topic):
                log.info(
                    "transaction: half message %s was %s before (a crash or a cancelled write) without its op record;"
                    " writing it",
                    record.unique_id,
                    outcome,
                )
                await self._write_op(half)
                return True
        half.in_doubt = False
        return False

    async def _write_op(self, half: Half) -> None:
        """Record in the op queue that `half` is decided. If the store refuses, the op is owed and written later;
        the half stays decided in memory (a restart before then finds it undecided and settles it again)."""
        store = self._broker.store
        try:
            put = store.append(op_record(half.queue_offset, self._broker.clock.now_ms()))
        except StoreError as exc:
            log.warning(
                "transaction: the op record of half-queue offset %d was refused (%s); written again later",
                half.queue_offset,
                from_store_error(exc),
            )
            self._owe_op(half)
            return
        # Noted before any await: op records must reach the ledger in queue order (see TransactionLedger).
        self.ledger.decided((half.queue_offset,), put.queue_offset)
        self._commit_progress()
        if not await store.wait_durable(put.end_offset):
            log.warning(
                "transaction: op record of half-queue offset %d not confirmed on disk in time", half.queue_offset
            )

    def _owe_op(self, half: Half) -> None:
        self._owed_ops.append(half)
        if self._owed_task is None or self._owed_task.done():
            self._owed_task = asyncio.get_running_loop().create_task(self._pay_owed_ops())

    async def _pay_owed_ops(self) -> None:
        while self._owed_ops:
            await asyncio.sleep(STORE_REFUSED_PAUSE_S)
            owed, self._owed_ops = self._owed_ops, []
            for half in owed:
                await self._write_op(half)

    def _commit_progress(self) -> None:
        progress = (self.ledger.half_offset, self.ledger.op_offset)
        if progress != self._committed:
            self._broker.commit_offset(TRANS_CHECK_GROUP, TRANS_HALF_TOPIC, 0, progress[0])
            self._broker.commit_offset(TRANS_CHECK_GROUP, TRANS_OP_HALF_TOPIC, 0, progress[1])
            self._committed = progress

    # --- running -----------------------------------------------------------------------------------------------

    async def start(self) -> None:
        broker = self._broker
        for topic in (TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC):
            if not broker.has_topic(topic):
                broker.create_topic(topic, queue_nums=1, perm=Perm.READ | Perm.WRITE)
        self.ledger = rebuild_ledger(
            broker.store,
            self.interval_ms,
            broker.query_offset(TRANS_CHECK_GROUP, TRANS_HALF_TOPIC, 0),
            broker.query_offset(TRANS_CHECK_GROUP, TRANS_OP_HALF_TOPIC, 0),
            load_check_times(self._path),
        )
        self._commit_progress()
        self._started = True
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        tasks = [task for task in (self._task, self._owed_task, *self._answers) if task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._task = self._owed_task = None
        self._answers.clear()
        if self._started:
            self._commit_progress()
            with contextlib.suppress(ConfigFileError):
                self._persist_check_times()

    def _persist_check_times(self) -> None:
        persist_check_times(self._path, self.ledger.check_times(), durable=self._broker.store.sync_flush)

    async def _run(self) -> None:
        clock = self._broker.clock
        spacing = min(CHECK_ROUND_SPACING_MS, self.interval_ms)
        last_round: int | None = None
        while True:
            self._wake.clear()
            due = self.ledger.next_due()
            if due is None:
                await self._wake.wait()
                continue
            if last_round is not None:
                due = max(due, last_round + spacing)
            if clock.now_ms() < due:
                await clock.sleep_until(due, self._wake)
                continue
            last_round = clock.now_ms()
            try:
                await self._round(last_round)
            except asyncio.CancelledError:
                raise
            except Exception:
                # A bug, not bad input: log it and keep checking rather than stop every transaction.
                log.exception("transaction: a round of check-backs failed")

    async def _round(self, now_ms: int) -> None:
        due = self.ledger.due(now_ms)
        records = {
            record.commit_log_offset: record
            for record in read_parked(self._broker.store, [half.commit_log_offset for half in due], "transaction")
        }
        to_discard: list[tuple[Half, StoredMessage]] = []
        to_check: list[tuple[Half, StoredMessage]] = []
        if any(half.in_doubt for half in due):
            await self._broker.wait_visible(timeout_s=60.0)  # once for all: already_moved asks the index
        for half in due:
            record = records.get(half.commit_log_offset)
            if self.ledger.get(half.queue_offset) is not half:
                continue  # decided while this round waited for the disk
            if record is None:  # lost (logged): nothing to check or move
                if self.ledger.take(half.queue_offset) is not None:
                    await self._write_op(half)
                continue
            if half.in_doubt:
                taken = self.ledger.take(half.queue_offset)
                if taken is None:
                    continue
                if await self._settle_doubt(taken, record, dispatched=True):
                    continue
                self.ledger.restore(taken)
                if self.ledger.get(half.queue_offset) is not half:
                    continue
            if half.checks >= self.check_max:
                to_discard.append((half, record))
            else:
                self.ledger.checked(half)
                to_check.append((half, record))
        if to_check:
            try:
                self._persist_check_times()
            except ConfigFileError:
                log.exception("transaction: check counts not persisted; a restart may check these halves again")
        for half, record in to_discard:
            await self._discard(half, record)
        for half, record in to_check:
            if self.ledger.get(half.queue_offset) is half:
                self._ask(half, record)

    async def _discard(self, half: Half, record: StoredMessage) -> None:
        """Move a half checked `check_max` times without a decision to TRANS_CHECK_MAX_TIME_TOPIC."""
        if self.ledger.take(half.queue_offset) is None:
            return
        properties = record.properties
        copy = moved_copy(record)
        copy.topic = TRANS_CHECK_MAX_TIME_TOPIC
        copy.queue_id = 0
        copy.properties[PROPERTY_REAL_TOPIC] = properties.get(PROPERTY_REAL_TOPIC, "")
        copy.properties[PROPERTY_REAL_QUEUE_ID] = properties.get(PROPERTY_REAL_QUEUE_ID, "0")
        copy.properties[PROPERTY_TRANSACTION_CHECK_TIMES] = str(half.checks)
        try:
            await self._store_copy(half, copy)
        except ServiceNotAvailableError as exc:
            log.warning(
                "transaction: the store refuses writes (%s); half message %s moved later", exc, record.unique_id
            )
            return  # undecided again and due at once: the next round tries again
        except CoreError as exc:
            log.error(
                "transaction: half message %s was checked %d times without a decision and could not be moved to %s;"
                " it is dropped: %s",
                record.unique_id,
                half.checks,
                TRANS_CHECK_MAX_TIME_TOPIC,
                exc,
            )
            if self.ledger.take(half.queue_offset) is not None:
                await self._write_op(half)
            return
        log.warning(
            "transaction: half message %s (topic %r, producer group %r, transaction %s) was checked %d times without"
            " a decision; moved to %s",
            record.unique_id,
            properties.get(PROPERTY_REAL_TOPIC),
            properties.get(PROPERTY_PRODUCER_GROUP),
            transaction_id_of(record),
            half.checks,
            TRANS_CHECK_MAX_TIME_TOPIC,
        )
        await self._write_op(half)

    def _ask(self, half: Half, record: StoredMessage) -> None:
        group = record.properties.get(PROPERTY_PRODUCER_GROUP, "")
        checker = self.checkers.pick(group)
        if checker is None:
            log.warning(
                "transaction: no live producer of group %r to check half message %s with (check %d of %d counted)",
                group,
                record.unique_id,
                half.checks,
                self.check_max,
            )
            return
        check = TransactionCheck.of(record, half.checks)
        try:
            answer = checker(check)
        except Exception:
            log.exception("transaction: the checker of group %r failed on half message %s", group, record.unique_id)
            return
        if answer is None:
            return  # the answer comes through `end`, if at all
        task = asyncio.get_running_loop().create_task(self._apply(record, answer))
        self._answers.add(task)
        task.add_done_callback(self._answers.discard)

    async def _apply(self, record: StoredMessage, answer: TransactionAnswer | Awaitable[TransactionAnswer]) -> None:
        """Carry out a checker's answer, awaiting it first if it comes later."""
        group = record.properties.get(PROPERTY_PRODUCER_GROUP, "")
        try:
            state = await answer if inspect.isawaitable(answer) else answer
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("transaction: the checker of group %r failed on half message %s", group, record.unique_id)
            return
        if state is None:
            return
        if not isinstance(state, LocalTransactionState):
            log.error("transaction: the checker of group %r answered %r, not a LocalTransactionState", group, state)
            return
        if state is LocalTransactionState.UNKNOW:
            return
        try:
            await self.end(group, record.commit_log_offset, state, queue_offset=record.queue_offset, from_check=True)
        except CoreError as exc:
            log.warning(
                "transaction: %s of half message %s failed (%s); checked again later",
                state.value,
                record.unique_id,
                exc,
            )
