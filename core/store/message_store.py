"""The message store facade (RocketMQ's DefaultMessageStore): open and recover, append, read, query, close.

Directory layout under `store_dir`:

    commitlog/<20-digit offset>           segments of the commit log (core.store.log.commit_log)
    consumequeue/<topic>/<queue id>/...   consume queues (core.store.queues.consume_queue)
    index/<yyyyMMddHHmmssSSS>             index files (core.store.index.file)
    checkpoint                            positions known to be on disk (core.store.checkpoint)
    abort                                 present while the store is open; left behind by a crash
    lock                                  flock'ed by the process that has the store open

Threads: the caller appends (under one lock, no syscall); `mqgate-dispatcher` builds consume queues and index
(the index in a process of its own with config.index_process: core.store.index.process);
`mqgate-flush` makes the log durable; `mqgate-checkpoint` flushes consume queues and index and writes the
checkpoint; `mqgate-retention` deletes old files and watches the disk.

Recovery (core.store.recovery): after a clean stop (no `abort` file) the store opens without reading the log.
After a crash it scans the log from the oldest checkpointed position, cuts a torn tail and rebuilds what the
consume queues and index lack.
"""

from __future__ import annotations

import asyncio
import dataclasses
import fcntl
import logging
import math
import mmap
import os
import threading
import time
from collections.abc import Callable, Iterable

from core.store.checkpoint import Checkpoint, CheckpointFile
from core.store.config import BrokerRole, FlushMode, StoreConfig
from core.store.errors import (
    CorruptRecordError,
    StoreError,
    StoreLockedError,
)
from core.store.ha.master import HAMaster
from core.store.ha.role import ReplicationRole
from core.store.ha.slave import HASlave
from core.store.ha.states import ReplicationState
from core.store.index.process import IndexProcess, IndexProcessError, wait_for_orphan
from core.store.index.service import IndexService
from core.store.log.appender import Appender
from core.store.log.commit_log import CommitLog
from core.store.log.flush_service import FlushService, FlushTimes, FlushWaiters, SegmentWarmer
from core.store.log.mapped_file import fsync_dir
from core.store.log.write_ring import WRITE_RING_FILE
from core.store.message import (
    Message,
    StoredMessage,
)
from core.store.put_result import PutResult, PutStatus
from core.store.queues.consume_queue_table import ConsumeQueueTable
from core.store.queues.dispatcher import Dispatcher, DispatchListener
from core.store.queues.reader import GetResult, GetStatus, QueueReader
from core.store.recovery import RecoveryReport, StoreRecovery
from core.store.retention import RetentionService, disk_usage_by_part, disk_usage_ratio
from core.store.service_thread import PeriodicService
from core.store.truncation import index_again, truncate_log, truncate_queues

log = logging.getLogger(__name__)

END_OF_TIME_MS = 2**62


class MessageStore:
    def __init__(self, config: StoreConfig) -> None:
        self.config = config
        self.commit_log = CommitLog(
            config.commit_log_dir,
            config.segment_size,
            config.max_message_size + 4096,
            (config.store_host, config.store_port),
            config.store_dir / WRITE_RING_FILE,
            config.write_ring_size,
        )
        self.queues = ConsumeQueueTable(
            config.consume_queue_dir, config.cq_entries_per_file, config.light_cq_entries_per_file
        )
        self.index = IndexService(config.index_dir, config.index_slots, config.index_entries)
        self.reader = QueueReader(self.commit_log, self.queues, config.commit_log_dir)
        self.dispatcher = Dispatcher(self.commit_log, self.queues, self.index)
        self.waiters = FlushWaiters(config.sync_flush_timeout_ms / 1000)
        self.flush_service = FlushService(
            self.commit_log, config.flush_mode, config.flush_interval_ms, self.waiters, on_error=self._flush_failed
        )
        self.warmer = (
            SegmentWarmer(self.commit_log, config.sync_warm_bytes, self.flush_service)
            if config.flush_mode is FlushMode.SYNC_FLUSH and config.sync_warm_bytes > 0
            else None
        )
        self.retention = RetentionService(config, self.commit_log, self.queues, self.index, self._set_refusal)
        self.checkpoint_file = CheckpointFile(config.store_dir / "checkpoint")
        self.recovery: RecoveryReport | None = None
        self.appender = Appender(
            self.commit_log,
            self.dispatcher,
            config.max_message_size,
            (config.store_host, config.store_port),
            str(config.store_dir),
        )
        # Append without waiting for the disk (the record is in the page cache and will be dispatched). Raises
        # InvalidTopicError / InvalidMessageError / MessageTooLargeError for bad input and StoreNotWritableError when
        # writes are refused; nothing is written then. `append_batch` checks and encodes all before it writes any, so
        # a bad message refuses the whole batch; one commit-log call then lays them down in order.
        # Both are the appender's bound methods themselves, not methods of the facade that pass the call on: every
        # message sent makes one call less (the broker takes `store.append` once).
        self.append: Callable[[Message], PutResult] = self.appender.append
        self.append_batch: Callable[[Iterable[Message]], list[PutResult]] = self.appender.append_batch
        self._disk_refusal: str | None = None
        self._flush_error: str | None = None
        self._open = False
        self._sync = config.flush_mode is FlushMode.SYNC_FLUSH
        self._lock_fd = -1
        self.checkpointer = PeriodicService(
            "mqgate-checkpoint", config.logic_flush_interval_ms / 1000, self._save_checkpoint
        )
        self._checkpoint_lock = threading.Lock()
        # The last flush of every consume queue (the first checkpoint is one): the records below this offset have
        # their queue entries on disk, what the checkpoint's `dispatched` vouches for.
        self._next_thorough_flush = -math.inf
        self._queues_flushed_below = 0
        # With config.index_process, the child that builds the index once the store is open; the last position
        # below which its index entries are on disk (the checkpoint's index_flushed).
        self.index_process: IndexProcess | None = None
        self._index_flushed = 0
        # Replication (core.store.ha): the role, a master's HA port and its slaves or a slave's link to its master,
        # the log's epochs; changed at run time under automatic failover.
        self.replication = ReplicationRole(
            config, self.commit_log, self.dispatcher.wake, self.wait_dispatched, self._refresh_refusal
        )
        # RocketMQ's getMessage: reads further behind the log's end than this are past what memory holds.
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        self.in_memory_bytes = memory * config.access_message_in_memory_max_ratio // 100

    # --- lifecycle ---------------------------------------------------------------------------------------

    def open(self) -> RecoveryReport:
        started = time.monotonic()
        config = self.config
        config.store_dir.mkdir(parents=True, exist_ok=True)
        self._lock_dir()
        try:
            abort = config.store_dir / "abort"
            crashed = abort.exists()
            checkpoint = self.checkpoint_file.load()
            self.commit_log.load()
            self.queues.load()
            wait_for_orphan(config.index_dir)
            index_from = self.index.load(not crashed, checkpoint.index_flushed)
            recovery = StoreRecovery(
                config.store_dir, self.commit_log, self.queues, self.index, self.dispatcher, self._save_checkpoint
            )
            report = recovery.run(checkpoint, crashed, index_from)
            self.recovery = dataclasses.replace(report, seconds=time.monotonic() - started)
            if config.index_process:
                self._hand_index_over()
            self.replication.bind()
            abort.touch()
            fsync_dir(config.store_dir)
        except BaseException:
            self._close_files()
            raise
        self._open = True
        self._refresh_refusal()
        if not self._sync and config.flush_after_bytes > 0:
            self.dispatcher.listeners.append(self._flush_when_due)
        self.dispatcher.start()
        self.flush_service.start()
        if self.warmer is not None:
            try:
                self.commit_log.warming.warm_up(config.sync_warm_bytes)
            except (OSError, StoreError) as exc:
                log.warning("commit log: writing zeros ahead of the log failed at open (%s)", exc)
            self.warmer.start()
        self.checkpointer.start()
        self.retention.check_disk()
        self.retention.start()
        self.dispatcher.listeners.append(self.replication.data_appended)
        self.replication.start()
        log.info("store %s open: %s", config.store_dir, self.recovery.summary())
        return self.recovery

    @property
    def ha_master(self) -> HAMaster | None:
        """A master's HA port and its slaves (None on a slave, or a master that does not listen)."""
        replication = self.replication
        return replication.master if replication.role is not BrokerRole.SLAVE else None

    @property
    def ha_slave(self) -> HASlave | None:
        """A slave's link to its master (None on a master)."""
        return self.replication.slave

    def replication_state(self) -> ReplicationState:
        """The log's end, a master's slaves (each's acknowledged offset and lag) and a slave's link to its master."""
        return self.replication.state()

    def become_master(self, epoch: int, sync: bool) -> int:
        """Under automatic failover: take writes as the master of `epoch` (core.store.ha.role); the offset the epoch
        begins at. Blocking."""
        return self.replication.become_master(epoch, sync)

    def become_slave(self, master_address: str, epochs: list[tuple[int, int]]) -> int:
        """Under automatic failover: follow the master at `master_address` (its HA port), whose log has `epochs`,
        once this log is cut to the last point both share (core.store.ha.role); the number of bytes cut. Blocking."""
        return self.replication.become_slave(master_address, epochs, self._truncate)

    def fence(self, reason: str | None) -> None:
        """Refuse writes with `reason` until `fence(None)` (a master that lost its lease in etcd)."""
        self.replication.fence(reason)

    def _truncate(self, offset: int) -> int:
        """Cut the log, its consume queues and its index at `offset` (core.store.truncation); the number of bytes
        cut. Nothing is appended meanwhile (the store is a slave with no link), and every record was dispatched."""
        cut = truncate_log(self.commit_log, offset)
        if cut:
            truncate_queues(self.commit_log, self.queues, offset)
            self.dispatcher.dispatched_offset = min(self.dispatcher.dispatched_offset, offset)
            if self.index_process is None:
                index_again(self.index, self.commit_log, self.index.drop_from(offset), offset)
            else:
                with self._checkpoint_lock:  # the checkpointer asks the index process too: not the one being replaced
                    self.index_process.close(offset)
                    index = IndexService(self.config.index_dir, self.config.index_slots, self.config.index_entries)
                    index.load(True, offset)
                    rebuild_from = index.drop_from(offset)
                    index.close()
                    self._hand_index_over(rebuild_from)
            self.replication.epochs.truncate_from(offset)
            self._save_checkpoint()
        return cut

    def _flush_when_due(self, _touched: object) -> None:
        """ASYNC_FLUSH, after each dispatch round: wake the flush thread once flush_after_bytes wait for the disk."""
        commit_log = self.commit_log
        if commit_log.committed_pos - commit_log.flushed_pos >= self.config.flush_after_bytes:
            self.flush_service.wake()

    def _hand_index_over(self, position: int | None = None) -> None:
        """Recovery left the index whole below the dispatched end of the log (or `position`, after a cut): from here
        the child builds it."""
        config = self.config
        if position is None:
            position = self.dispatcher.dispatched_offset
            self.index.flush()
            self.index.close()
        child = IndexProcess(
            config.index_dir, config.index_slots, config.index_entries, config.commit_log_dir, config.segment_size
        )
        child.start(position)
        child.advance(self.dispatcher.dispatched_offset)
        self.index_process = child
        self._index_flushed = position
        self.dispatcher.index = None
        self.dispatcher.progress = child.advance
        self.retention.index = child

    def _lock_dir(self) -> None:
        self._lock_fd = os.open(self.config.store_dir / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._lock_fd)
            self._lock_fd = -1
            raise StoreLockedError(
                f"store {self.config.store_dir} is open in another process; stop it or use another --data-dir"
            ) from None

    def close(self) -> None:
        """Stop the threads, flush everything, write the checkpoint and remove the abort marker."""
        if self._lock_fd < 0:
            return
        self._open = False
        self._refresh_refusal()
        self.replication.close()
        self.retention.stop()
        self.checkpointer.stop()
        if self.warmer is not None:
            self.warmer.stop()
        self.flush_service.stop()
        self.dispatcher.stop()
        for queue in self.queues.all():
            queue.flush()
        end = self.commit_log.write_pos
        if self.index_process is not None:
            reached = self.index_process.close(end)
            self.index_process = None
            indexed = end if reached == end else self._index_flushed
        else:
            self.index.flush()
            indexed = end
        self.checkpoint_file.save(Checkpoint(end, end, indexed, int(time.time() * 1000)))
        (self.config.store_dir / "abort").unlink(missing_ok=True)
        fsync_dir(self.config.store_dir)
        self._close_files()

    def _close_files(self) -> None:
        self.replication.close()  # bound, never started (the open failed)
        if self.index_process is not None:
            self.index_process.close(self.dispatcher.dispatched_offset)
            self.index_process = None
        self.commit_log.close()
        self.queues.close()
        self.index.close()
        self.checkpoint_file.close()
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1

    def _save_checkpoint(self) -> Checkpoint:
        with self._checkpoint_lock:
            flushed = self.commit_log.flushed_pos
            dispatched = self.dispatcher.dispatched_offset
            now = time.monotonic()
            thorough = now >= self._next_thorough_flush
            least = 0 if thorough else self.config.logic_flush_least_pages * mmap.PAGESIZE
            for queue in self.queues.all():
                queue.flush(least)
            if thorough:
                # Every record below `dispatched` had its queue entries written before this flush of them all.
                self._queues_flushed_below = dispatched
                self._next_thorough_flush = now + self.config.logic_flush_thorough_interval_ms / 1000
            if self.index_process is not None:
                try:
                    self._index_flushed = self.index_process.flush(dispatched)
                except IndexProcessError as exc:
                    log.error("store %s: index not flushed (%s); the checkpoint keeps its last position",
                              self.config.store_dir, exc)  # fmt: skip
                indexed = self._index_flushed
            else:
                self.index.flush()
                # Every record below `dispatched` had its index entries written before this flush.
                indexed = dispatched
            checkpoint = Checkpoint(flushed, self._queues_flushed_below, indexed, int(time.time() * 1000))
            self.checkpoint_file.save(checkpoint)
            return checkpoint

    def _flush_failed(self, error: BaseException) -> None:
        # After a failed fdatasync the kernel may have dropped the dirty pages: retrying can "succeed" without
        # the data ever reaching the disk. Stop taking writes; a restart recovers from what is really on disk.
        self._flush_error = (
            f"flushing the commit log failed ({error}); writes are refused until the store is reopened,"
            " which recovers from what reached the disk"
        )
        self._refresh_refusal()

    def _set_refusal(self, reason: str | None) -> None:
        self._disk_refusal = reason
        self._refresh_refusal()

    def _refresh_refusal(self) -> None:
        # Why appends are refused right now, or None: one attribute, so the append path checks it once.
        if not self._open:
            self.appender.refusal = "the store is not open"
        else:
            self.appender.refusal = self.replication.refusal() or self._flush_error or self._disk_refusal

    # --- writing -----------------------------------------------------------------------------------------
    # (`append` and `append_batch` are the appender's own, bound in __init__.)

    async def put(self, message: Message) -> PutResult:
        """Append and wait as `wait_stored` says (on disk under SYNC_FLUSH, on a slave under SYNC_MASTER)."""
        result = self.append(message)
        if self._sync or self.replication.sync_master:
            status = await self.wait_stored(result.end_offset)
            if status is not PutStatus.PUT_OK:
                return result.with_status(status)
        return result

    async def put_batch(self, messages: Iterable[Message]) -> list[PutResult]:
        """Append several messages and wait once, for the last, as `put`."""
        results = self.append_batch(messages)
        if (self._sync or self.replication.sync_master) and results:
            status = await self.wait_stored(results[-1].end_offset)
            if status is not PutStatus.PUT_OK:
                return [result.with_status(status) for result in results]
        return results

    @property
    def sync_flush(self) -> bool:
        """True under SYNC_FLUSH: an append is acknowledged only once `wait_durable` says it is on disk."""
        return self._sync

    @property
    def acks_wait(self) -> bool:
        """True when an append is acknowledged only after `wait_stored`: under SYNC_FLUSH, or on a SYNC_MASTER."""
        return self._sync or self.replication.sync_master

    async def wait_durable(self, end_offset: int) -> bool:
        """Under SYNC_FLUSH, wait until the log is on disk up to `end_offset` (a PutResult's end_offset): True, or
        False after sync_flush_timeout_ms (FLUSH_DISK_TIMEOUT; the record stays in the log). True at once under
        ASYNC_FLUSH, where nobody waits for the disk."""
        if not self._sync:
            return True
        return await self.flush_service.durable(end_offset)

    async def wait_stored(self, end_offset: int) -> PutStatus:
        """Wait until the log up to `end_offset` (a PutResult's end_offset) is stored as the broker promises before
        it acknowledges: on disk under SYNC_FLUSH (else FLUSH_DISK_TIMEOUT after sync_flush_timeout_ms), and on a
        SYNC_MASTER held by a slave too (else FLUSH_SLAVE_TIMEOUT after slave_timeout_ms, or SLAVE_NOT_AVAILABLE at
        once when no slave is connected within ha_max_gap_not_in_sync). Both waits run at once; a slave's failure
        is the one told, as RocketMQ's. PUT_OK at once when neither applies. For callers that `append` and wait
        apart, as `put` does; the record stays in the log whatever the answer."""
        disk = self.flush_service.durable(end_offset) if self._sync else None
        status = PutStatus.PUT_OK
        if self.replication.sync_master:
            status = await self.replication.wait(end_offset)
        if disk is not None and not await disk and status is PutStatus.PUT_OK:
            status = PutStatus.FLUSH_DISK_TIMEOUT
        return status

    def put_blocking(self, message: Message) -> PutResult:
        """`put` for callers on plain threads."""
        result = self.append(message)
        if self._sync:
            self.flush_service.wake()
            if not self.waiters.wait_blocking(result.end_offset):
                return result.with_status(PutStatus.FLUSH_DISK_TIMEOUT)
        if self.replication.sync_master:
            status = self.replication.wait_blocking(result.end_offset)
            if status is not PutStatus.PUT_OK:
                return result.with_status(status)
        return result

    def flush(self) -> int:
        """Flush the commit log now; return the flushed position."""
        return self.flush_service.flush_once()

    # --- reading -----------------------------------------------------------------------------------------

    def get_messages(
        self,
        topic: str,
        queue_id: int,
        offset: int,
        max_count: int = 32,
        tag_filter: Callable[[int], bool] | None = None,
        message_filter: Callable[[StoredMessage], bool] | None = None,
        max_bytes: int = 4 * 1024 * 1024,
    ) -> GetResult:
        """Read up to `max_count` messages of a queue from `offset`, about `max_bytes` at most (RocketMQ's
        getMessage; core.store.queues.reader).

        `tag_filter` sees each entry's tag code before the log is read; `message_filter` sees the message.
        Messages read from a light queue carry their offset in that queue as `queue_offset`.
        """
        return self.reader.get_messages(topic, queue_id, offset, max_count, tag_filter, message_filter, max_bytes)

    def far_behind(self, commit_log_offset: int) -> bool:
        """Whether a read at `commit_log_offset` lies further behind the log's end than access_message_in_memory_
        max_ratio of memory: a master suggests that such readers read from a slave (RocketMQ's
        suggestPullingFromSlave)."""
        return self.commit_log.write_pos - commit_log_offset > self.in_memory_bytes

    def queue_entries(self, topic: str, queue_id: int, offset: int, max_count: int) -> list[tuple[int, int, int]]:
        """The consume-queue entries (commit-log offset, size, tag code) of a queue from `offset`, without
        reading the log: for readers that keep recent records decoded. Size 0 marks a hole. Returns at most
        `max_count`, possibly fewer than there are (entries of one queue file), and none when `offset` is
        outside the queue: `get_messages` says why."""
        queue = self.queues.get(topic, queue_id)
        return queue.entries(offset, max_count) if queue is not None else []

    def min_offset(self, topic: str, queue_id: int) -> int:
        queue = self.queues.get(topic, queue_id)
        return queue.min_offset if queue else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        queue = self.queues.get(topic, queue_id)
        return queue.max_offset if queue else 0

    def offset_by_time(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        queue = self.queues.get(topic, queue_id)
        if queue is None:
            return 0
        return queue.offset_by_time(timestamp_ms, self.commit_log.store_timestamp_at)

    def read_message(self, commit_log_offset: int) -> StoredMessage:
        """The record at a commit-log offset. Raises LookupError or CorruptRecordError."""
        return self.commit_log.read_message(commit_log_offset)

    def query_messages(
        self, topic: str, key: str, max_num: int = 32, begin_ms: int = 0, end_ms: int = END_OF_TIME_MS
    ) -> list[StoredMessage]:
        """Messages of `topic` with `key` among their keys or as their unique id, stored in the time range,
        newest first."""
        found = []
        if self.index_process is not None:
            # Every record visible now is indexed before the child answers.
            upto = self.dispatcher.dispatched_offset
            offsets = self.index_process.query(topic, key, max_num * 2, begin_ms, end_ms, upto)
        else:
            offsets = self.index.query(topic, key, max_num * 2, begin_ms, end_ms)
        for offset in offsets:
            try:
                message = self.commit_log.read_message(offset)
            except (LookupError, CorruptRecordError):
                continue
            if message.topic == topic and (key in message.keys or message.unique_id == key):
                found.append(message)
                if len(found) >= max_num:
                    break
        return found

    def find_by_unique_id(self, topic: str, unique_id: str) -> StoredMessage | None:
        for message in self.query_messages(topic, unique_id, max_num=4):
            if message.unique_id == unique_id:
                return message
        return None

    # --- administration ----------------------------------------------------------------------------------

    def add_dispatch_listener(self, listener: DispatchListener) -> None:
        """`listener(set of (topic, queue id))` is called on the dispatcher thread after new messages
        become visible; it must not block (hand over to an event loop with call_soon_threadsafe)."""
        self.dispatcher.listeners.append(listener)

    def wait_dispatched(self, offset: int | None = None, timeout: float = 10.0) -> bool:
        target = self.commit_log.write_pos if offset is None else offset
        self.dispatcher.wake()
        return self.dispatcher.wait_dispatched(target, timeout)

    async def wait_visible(self, offset: int | None = None, timeout: float = 10.0) -> bool:
        return await asyncio.to_thread(self.wait_dispatched, offset, timeout)

    def delete_expired_files(self) -> int:
        """Run retention now, whatever the hour (RocketMQ's executeDeleteFilesManually)."""
        return self.retention.run_once(manual=True)

    def delete_topic(self, topic: str) -> int:
        """Delete a topic's consume queues (its records stay in the log until retention removes them)."""
        count = self.queues.delete_topic(topic)
        with self.commit_log.lock:
            for key in [key for key in self.commit_log.queue_offsets if key[0] == topic]:
                del self.commit_log.queue_offsets[key]
        return count

    @property
    def end_offset(self) -> int:
        """The commit-log offset the next record will be written at."""
        return self.commit_log.write_pos

    @property
    def writable(self) -> bool:
        return self.appender.refusal is None

    @property
    def flush_times(self) -> FlushTimes:
        """How long the flushes of the commit log took (written by the flush thread; read `snapshot()`)."""
        return self.flush_service.times

    def disk_usage(self) -> dict[str, int]:
        """Bytes the store's files take on disk, by part: "commitlog", "consumequeue", "index", "write_ring"
        (allocated blocks: segments and index files are sparse, so this is what they hold, not their length). Walks
        the directories, a stat per file: call it off the event loop."""
        return disk_usage_by_part(self.config)

    def disk_usage_ratio(self) -> float:
        """The used fraction of the file system holding the store (what retention compares with its ratios)."""
        return disk_usage_ratio(self.config.store_dir)

    def stats(self) -> dict[str, int]:
        return {
            "commit_log_min_offset": self.commit_log.min_offset,
            "commit_log_max_offset": self.commit_log.write_pos,
            "flushed_offset": self.commit_log.flushed_pos,
            "dispatched_offset": self.dispatcher.dispatched_offset,
            "segments": len(self.commit_log.files.files),
            "consume_queues": len(self.queues.all()),
            "flushes": self.flush_service.flushes,
        }


__all__ = [
    "GetResult",
    "GetStatus",
    "MessageStore",
    "PutResult",
    "PutStatus",
    "RecoveryReport",
    "StoreError",
]
