"""The commit log: one append-only log of records for all topics, in segments (core.store.log.mapped_file).

Record layout: core.store.log.record_codec. Appends happen under one lock, in the caller's thread, into the write ring
(core.store.log.write_ring), a mapping whose pages stay in memory: no syscall per message. `commit` writes what the
ring holds past the committed position into the segments with pwrite, outside that lock: the dispatcher does
before each round, so a record is in its segment before any reader can see it. Reads of records the ring still
holds are served from it (`_read_from_ring`). The lock also assigns queue
offsets (RocketMQ's topicQueueTable), so queue order and log order agree, and it queues a dispatch request for
the dispatcher, which turns it into a consume-queue entry and index entries. After a crash the dispatcher is fed
from `scan` instead.
"""

from __future__ import annotations

import bisect
import logging
import os
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Final

from core.store.errors import CorruptRecordError, RecordFormatError, StoreNotWritableError
from core.store.log.checksum import crc32
from core.store.log.mapped_file import MappedFile, MappedFileQueue, file_name
from core.store.log.record_codec import (
    BLANK_MIN_SIZE,
    HEADER_SIZE,
    STORE_TIMESTAMP,
    STORE_TIMESTAMP_POS,
    append_record,
    decode_record,
    encode_blank,
    encode_header,
)
from core.store.log.replay import replay
from core.store.log.scan import ScanResult, restore_from_ring, scan
from core.store.log.warming import LogWarming
from core.store.log.write_ring import HEADER_PAGE, WRITE_CHUNK, WriteRing
from core.store.message import (
    Message,
    StoredMessage,
    encode_host,
)

log = logging.getLogger(__name__)


# A sparse segment is created only if this much is free besides it, for consume-queue and index files.
SEGMENT_FREE_MARGIN = 64 * 1024
# Final: held in a C static by the compiled module (a module attribute is a lookup on every append).
_time_ns: Final = time.time_ns

# (topic, queue_id, queue_offset, commit_log_offset, size, tags_code, store_timestamp, keys, unique_id)
DispatchRequest = tuple[str, int, int, int, int, int, int, "str | None", "str | None"]
# A checked message as `append` takes it (core.store.log.appender.Appender.prepare): (message, topic, queue id, body,
# tail, light queues, tag code, keys, unique id). The body and tail (encoded topic and properties) are the record's
# bytes that do not depend on where it lands; the message's other fields (born host, flags, times) are read here.
Record = tuple[Message, str, int, bytes, bytes, tuple[str, ...], int, "str | None", "str | None"]


def _request_end(request: DispatchRequest) -> int:
    """Where a dispatch request's record ends in the log."""
    return request[3] + request[4]


class CommitLog:
    def __init__(
        self,
        directory: Path,
        segment_size: int,
        max_record_size: int,
        store_host: tuple[str, int],
        ring_path: Path,
        ring_size: int,
    ) -> None:
        self.store_host = encode_host(store_host[0])
        self.store_port = store_host[1]
        self.files = MappedFileQueue(directory, segment_size, sparse=True)
        self.segment_size = segment_size
        self.max_record_size = max_record_size
        self.lock = threading.Lock()
        self.write_pos = 0  # commit-log offset of the next record; every record below it is whole (in the ring)
        self.committed_pos = 0  # every byte below it is in its segment (the page cache of the segment's file)
        self.flushed_pos = 0  # every byte below it is on disk
        self.ring = WriteRing(ring_path, ring_size)
        self.commit_lock = threading.Lock()
        # Reads are served from the ring for records from `_ring_start` on (what was appended since the ring was
        # made ready) that it still holds (`_read_from_ring`); `ring_writes` counts writes into it, twice each.
        self._ring_start = 2**63
        # Zeros written ahead of the log under SYNC_FLUSH (core.store.log.warming).
        self.warming = LogWarming(self)
        self.ring_writes = 0
        # Segments closed by a filler record: base -> the end of the filler (bytes after it are never written).
        self._filled: dict[int, int] = {}
        self.queue_offsets: dict[tuple[str, int], int] = {}
        # Dispatch requests of the records appended since the dispatcher last took them (under the lock).
        self.pending: list[DispatchRequest] = []
        self._current: MappedFile | None = None
        # The last born address encoded, and its 16 bytes (one tuple: appenders on several threads replace it whole).
        self._last_born: tuple[str, bytes] = ("", b"")

    # --- appending -------------------------------------------------------------------------------------

    def append(self, record: Record) -> tuple[int, int, int, int]:
        """Append one record; return (commit_log_offset, size, queue_offset, store_timestamp).

        The record is checked and its body and tail encoded by the caller. This is the hot path: no syscall, one
        lock, one copy into the mapping. Its light queues (checked names) each get the next offset of their queue 0
        and a dispatch request.
        """
        message, topic, queue_id, body, tail, light_queues, code, keys, unique_id = record
        size = HEADER_SIZE + len(body) + len(tail)
        body_crc = crc32(body)
        key = (topic, queue_id)
        born_address, born_port = message.born_host
        born_host = self._encoded_host(born_address)
        ring = self.ring
        with self.lock:
            pos = self.write_pos
            mapped = self._current
            if mapped is None or pos + size + BLANK_MIN_SIZE > mapped.end:
                mapped = self._roll(pos, size)
                pos = mapped.base if pos < mapped.base else pos
            if pos + size - self.committed_pos > ring.size:
                self._make_room(pos + size)
            queue_offset = self.queue_offsets.get(key, 0)
            store_timestamp = _time_ns() // 1_000_000
            header = encode_header(
                body,
                body_crc,
                tail,
                queue_id,
                message.flag,
                queue_offset,
                pos,
                message.sys_flag,
                message.born_timestamp,
                born_host,
                born_port,
                store_timestamp,
                self.store_host,
                self.store_port,
                message.reconsume_times,
                message.prepared_transaction_offset,
            )
            start = pos % ring.size
            self.ring_writes += 1  # odd while the ring is written: see _read_from_ring
            if start + size <= ring.size:
                mm = ring.mm
                assert mm is not None
                start += HEADER_PAGE
                body_start = start + HEADER_SIZE
                tail_start = body_start + len(body)
                mm[start:body_start] = header
                mm[body_start:tail_start] = body
                mm[tail_start : start + size] = tail
            else:
                ring.put(pos, header + body + tail)
            self.ring_writes += 1
            self.queue_offsets[key] = queue_offset + 1
            self.pending.append((topic, queue_id, queue_offset, pos, size, code, store_timestamp, keys, unique_id))
            if light_queues:
                self.add_light_entries(light_queues, pos, size, code, store_timestamp, self.pending)
            self.write_pos = pos + size
        return pos, size, queue_offset, store_timestamp

    def _encoded_host(self, address: str) -> bytes:
        """encode_host, remembering the last address: a connection's messages all come from one."""
        last = self._last_born
        if address == last[0]:
            return last[1]
        packed = encode_host(address)
        self._last_born = (address, packed)
        return packed

    def append_batch(self, records: list[Record]) -> list[tuple[int, int, int, int]]:
        """`append` for several records, under one lock with one store time: the records of a segment are laid out
        in one buffer and copied into the mapping at once. Their dispatch requests are queued after their bytes are
        in place, in log order, as `append`'s."""
        results: list[tuple[int, int, int, int]] = []
        requests: list[DispatchRequest] = []
        offsets = self.queue_offsets
        store_host, store_port = self.store_host, self.store_port
        place_at = self.ring.size // 4
        with self.lock:
            store_timestamp = _time_ns() // 1_000_000
            pos = self.write_pos
            mapped = self._current
            buffer = bytearray()
            buffer_pos = pos
            for message, topic, queue_id, body, tail, light_queues, code, keys, unique_id in records:
                size = HEADER_SIZE + len(body) + len(tail)
                if mapped is None or pos + size + BLANK_MIN_SIZE > mapped.end:
                    if buffer:
                        self._place(buffer_pos, buffer, requests, pos)
                        buffer = bytearray()
                        requests = []
                    mapped = self._roll(pos, size)
                    pos = mapped.base if pos < mapped.base else pos
                    buffer_pos = pos
                key = (topic, queue_id)
                queue_offset = offsets.get(key, 0)
                offsets[key] = queue_offset + 1
                born_address, born_port = message.born_host
                born_host = self._encoded_host(born_address)
                append_record(
                    buffer,
                    body,
                    tail,
                    queue_id,
                    message.flag,
                    queue_offset,
                    pos,
                    message.sys_flag,
                    message.born_timestamp,
                    born_host,
                    born_port,
                    store_timestamp,
                    store_host,
                    store_port,
                    message.reconsume_times,
                    message.prepared_transaction_offset,
                )
                requests.append((topic, queue_id, queue_offset, pos, size, code, store_timestamp, keys, unique_id))
                if light_queues:
                    self.add_light_entries(light_queues, pos, size, code, store_timestamp, requests)
                results.append((pos, size, queue_offset, store_timestamp))
                pos += size
                if len(buffer) >= place_at:  # a batch larger than the ring goes in in parts
                    self._place(buffer_pos, buffer, requests, pos)
                    buffer = bytearray()
                    requests = []
                    buffer_pos = pos
            if buffer:
                self._place(buffer_pos, buffer, requests, pos)
        return results

    def _place(self, pos: int, buffer: bytearray, requests: list[DispatchRequest], end: int) -> None:
        """Copy records laid out in `buffer` to log position `pos`, then queue their dispatch requests and move
        write_pos to `end` (under the lock)."""
        self._put(pos, buffer)
        self.pending.extend(requests)
        self.write_pos = end

    def _put(self, pos: int, data: bytes | bytearray) -> None:
        """Copy `data` into the ring at log position `pos`, committing first if the ring has no room (under the
        lock)."""
        ring = self.ring
        if pos + len(data) - self.committed_pos > ring.size:
            self._make_room(pos + len(data))
        self.ring_writes += 1
        ring.put(pos, data)
        self.ring_writes += 1

    def _make_room(self, end: int) -> None:
        """The ring is full up to `end`: commit what it holds here, on the appending thread (under the lock; the
        commit takes only its own). Raises StoreNotWritableError if the segments cannot be written."""
        if end - self.write_pos > self.ring.size:
            raise ValueError(f"a record of {end - self.write_pos} bytes does not fit in the write ring")
        # Enough to go on (a quarter of the ring, at most a mebibyte, past what `end` needs), to the end of a record:
        # a committed position is always a record boundary (readers trust whole records below it). The records not
        # yet taken by the dispatcher are in `pending`, in log order; failing that, everything is committed.
        wanted = end - self.ring.size + min(WRITE_CHUNK, self.ring.size // 4)
        pending = self.pending
        index = bisect.bisect_left(pending, wanted, key=_request_end)
        upto = _request_end(pending[index]) if index < len(pending) else self.write_pos
        try:
            self.commit(upto)
        except OSError as exc:
            raise StoreNotWritableError(
                f"cannot write the commit log in {self.files.directory}: {exc}; the records already acknowledged"
                " are kept in the write ring and written when the store is opened again"
            ) from exc

    def add_light_entries(
        self,
        names: tuple[str, ...],
        pos: int,
        size: int,
        code: int,
        stamp: int,
        out: list[DispatchRequest],
    ) -> None:
        """A dispatch request per light queue, at its next offset (under the lock; recovery replays it)."""
        offsets = self.queue_offsets
        pending = out
        for name in names:
            key = (name, 0)
            light_offset = offsets.get(key, 0)
            offsets[key] = light_offset + 1
            pending.append((name, 0, light_offset, pos, size, code, stamp, None, None))

    # --- a copy of a master's log (core.store.ha) ------------------------------------------------------

    def start_at(self, pos: int) -> None:
        """Make an empty log begin at `pos`, a segment's start: a slave's copy begins with the master's last
        segment. Raises ValueError if the log holds anything."""
        with self.lock:
            if self.files.files or self.write_pos:
                raise ValueError(f"the commit log in {self.files.directory} is not empty: it cannot start at {pos}")
            if pos % self.segment_size:
                raise ValueError(f"commit-log offset {pos} is not the start of a segment of {self.segment_size}")
            self.write_pos = self.committed_pos = self.flushed_pos = pos
            self._ring_start = pos
            self.warming.warmed_pos = pos
            self.ring.set_committed(pos)

    def append_replicated(self, pos: int, data: bytes, messages: list[StoredMessage], filler: bool) -> None:
        """Append records copied from a master at the write position `pos`: whole and checked records of one
        segment, decoded in `messages` (core.store.ha.continuation), or the first bytes of the filler that closes the
        segment (the log then goes on at the next). Their queue entries are queued for the dispatcher as an
        append's, at the queue offsets the master gave them. Raises ValueError if `pos` is not the write position
        or the data does not fit in its segment; StoreNotWritableError as `append`."""
        with self.lock:
            if pos != self.write_pos:
                raise ValueError(f"replicated data at commit-log offset {pos}: this log ends at {self.write_pos}")
            mapped = self._current
            if mapped is None or not mapped.base <= pos < mapped.end:
                mapped = self._segment_for(pos)
            if pos + len(data) + (0 if filler else BLANK_MIN_SIZE) > mapped.end:
                raise ValueError(f"replicated data at commit-log offset {pos} runs past its segment's end")
            self._put(pos, data)
            requests: list[DispatchRequest] = []
            offsets = self.queue_offsets
            for message in messages:
                replay(self, message, requests)
                key = (message.topic, message.queue_id)
                if message.queue_offset >= offsets.get(key, 0):
                    offsets[key] = message.queue_offset + 1
            self.pending.extend(requests)
            if filler:
                self._filled[mapped.base] = pos + BLANK_MIN_SIZE
                self._current = None
                self.write_pos = mapped.end
            else:
                self.write_pos = pos + len(data)

    def _segment_for(self, pos: int) -> MappedFile:
        """The segment holding `pos`, made if it is the next one (under the lock)."""
        existing = self.files.find(pos)
        if existing is None:
            base = pos - pos % self.segment_size
            try:
                existing = self.files.create(base)
            except OSError as exc:
                raise StoreNotWritableError(
                    f"cannot create commit-log segment {file_name(base)} in {self.files.directory}: {exc.strerror}"
                ) from exc
        self._current = existing
        return existing

    def _roll(self, pos: int, size: int) -> MappedFile:
        """Close the current segment with a filler record and map the next one (called under the lock)."""
        mapped = self._current
        if mapped is not None:
            self._put(pos, encode_blank(mapped.size - (pos - mapped.base)))
            self._filled[mapped.base] = pos + BLANK_MIN_SIZE
            self.write_pos = mapped.end
            # If the next segment cannot be created, the next append starts from the new position.
            self._current = None
        base = mapped.end if mapped is not None else pos
        existing = self.files.find(base)
        if existing is None:
            free = shutil.disk_usage(self.files.directory).free
            if free < self.segment_size + SEGMENT_FREE_MARGIN:
                raise StoreNotWritableError(
                    f"cannot create commit-log segment {file_name(base)} in {self.files.directory}: it needs"
                    f" {self.segment_size + SEGMENT_FREE_MARGIN} bytes free and the file system has {free}"
                    " (No space left for a whole segment); free disk space or lower segment_size"
                )
            try:
                existing = self.files.create(base)
            except OSError as exc:
                raise StoreNotWritableError(
                    f"cannot create commit-log segment {file_name(base)} in {self.files.directory}: {exc.strerror};"
                    " free disk space or lower segment_size"
                ) from exc
        self._current = existing
        if size + BLANK_MIN_SIZE > self._current.size:
            raise ValueError(f"a record of {size} bytes cannot fit in a segment of {self._current.size}")
        return self._current

    def take_pending(self) -> tuple[list[DispatchRequest], int]:
        """The records appended since the last call, and a log position that they cover (past any filler).

        The list is taken whole and replaced under the lock, for the moment of two assignments: appends queue
        their requests under it too, so the list holds exactly the records below that position. (Draining a
        deque one request at a time without the lock took a quarter of the dispatcher's time.)
        """
        with self.lock:
            pending = self.pending
            self.pending = []
            return pending, self.write_pos

    # --- flushing --------------------------------------------------------------------------------------

    def commit(self, upto: int = -1) -> int:
        """Write what the ring holds below the write position (or `upto`, a record boundary below it) into the
        segments; return the committed position.

        Runs on whichever thread asks (the dispatcher before each round, the flush, a reader, an append that finds
        the ring full), one at a time; pwrite releases the GIL for the copy. Raises OSError if a segment cannot be
        written: the records stay in the ring (in the page cache, and restored at the next open)."""
        with self.commit_lock:
            pos = self.committed_pos
            target = self.write_pos if upto < 0 else min(upto, self.write_pos)
            if pos >= target:
                return pos
            ring = self.ring
            while pos < target:
                mapped = self.files.find(pos)
                if mapped is None:
                    raise OSError(f"commit-log offset {pos}: no segment holds it")
                filled = self._filled.get(mapped.base, mapped.end)
                stop = min(target, filled)
                if stop > pos:
                    ring.write_out(mapped.write_fd(), pos - mapped.base, pos, stop - pos)
                if stop == filled:
                    self._filled.pop(mapped.base, None)
                    stop = mapped.end if target >= mapped.end else target
                pos = stop
                self.committed_pos = pos
            ring.set_committed(pos)
            return pos

    def ensure_segment(self) -> None:
        """Make the segment at the write position if there is none yet (at open, before the first append)."""
        with self.lock:
            if self._current is None:
                self._roll(self.write_pos, 0)

    def flush(self, commit: bool = True) -> int:
        """Commit (unless told not to: the dispatcher commits every round), then fdatasync every segment holding
        committed bytes not yet on disk; return the new flushed position."""
        target = self.commit() if commit else self.committed_pos
        if target > self.flushed_pos:
            for mapped in self.files.files:
                if mapped.end > self.flushed_pos and mapped.base < target and not mapped.closed:
                    mapped.flush()
            self.flushed_pos = target
        return self.flushed_pos

    # --- reading ---------------------------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        files = self.files.files
        return files[0].base if files else 0

    def read_message(self, offset: int) -> StoredMessage:
        """Decode the record at `offset`. Raises CorruptRecordError (with file and offset) or LookupError."""
        # Not below the log's start: retention may have deleted a segment whose records the ring still holds.
        if self._ring_start <= offset < self.write_pos and offset >= self.min_offset:
            message = self._read_from_ring(offset)
            if message is not None:
                return message
        mapped = self._file_at(offset)
        start = offset - mapped.base
        try:
            message = decode_record(mapped.view, start, mapped.size)
        except RecordFormatError as exc:
            raise CorruptRecordError(str(mapped.path), start, offset, str(exc)) from None
        except ValueError:
            raise LookupError(f"commit-log offset {offset}: its segment was deleted") from None
        if message.commit_log_offset != offset:
            raise CorruptRecordError(
                str(mapped.path), start, offset, f"record says it is at {message.commit_log_offset}"
            )
        return message

    def _read_from_ring(self, offset: int) -> StoredMessage | None:
        """The record at `offset` (appended since the ring was made ready, below the write position) decoded from
        the write ring if it still holds it (a consumer reads what was appended moments ago: the ring's bytes are in
        this core's cache, the segment's were written by the dispatcher's pwrite on the other), or None: written
        over (the log has gone a ring's size past it), not wholly in the ring (it wraps its end), or written while
        it was decoded.

        Appends on other threads may write the ring meanwhile: `ring_writes` is odd while they do and grows with
        every write (a sequence lock), so a decode that saw it even before it looked at the write position, and
        unchanged after, read bytes no write touched in between; the record's checks and position back that up."""
        ring = self.ring
        view = ring.view
        writes = self.ring_writes
        if view is None or writes & 1 or self.write_pos > offset + ring.size:
            return None
        try:
            # No CRCs: the ring's records past `_ring_start` were appended by this process since the store opened,
            # and have not left its memory since.
            message = decode_record(view, HEADER_PAGE + offset % ring.size, HEADER_PAGE + ring.size, False)
        except RecordFormatError:
            return None
        if self.ring_writes != writes or message.commit_log_offset != offset:
            return None
        return message

    def store_timestamp_at(self, offset: int) -> int | None:
        try:
            mapped = self._file_at(offset)
            return int(STORE_TIMESTAMP.unpack_from(mapped.mm, offset - mapped.base + STORE_TIMESTAMP_POS)[0])
        except (LookupError, ValueError):
            return None

    def _file_at(self, offset: int) -> MappedFile:
        if not self.min_offset <= offset < self.write_pos:
            raise LookupError(f"commit-log offset {offset} is outside [{self.min_offset}, {self.write_pos})")
        if offset >= self.committed_pos:
            self.commit()  # read before the dispatcher's round: the record is still only in the ring
        mapped = self.files.find(offset)
        if mapped is None:
            raise LookupError(f"commit-log offset {offset}: no segment holds it")
        return mapped

    # --- recovery --------------------------------------------------------------------------------------

    def load(self) -> int:
        """Map the segments, then write into them the records the last run's write ring holds past its committed
        position (appended, acknowledged, not yet committed when the process stopped); return how many. The ring is
        then made ready for appends."""
        self.files.load()
        ring = self.ring
        committed = ring.open_existing()
        restored = 0
        end = 0
        if committed is not None:
            end, restored = restore_from_ring(ring, self.files, self.max_record_size, committed)
            if restored:
                log.warning(
                    "%s: %d records restored from the write ring (%d to %d)", ring.path, restored, committed, end
                )
        ring.prepare(end)
        self._ring_start = end
        return restored

    def scan(self, start: int, result: ScanResult) -> Iterator[StoredMessage]:
        """The records from `start` to the end of the log, checked (core.store.log.scan.scan)."""
        return scan(self.files, self.max_record_size, max(start, self.min_offset), result)

    def set_end(self, end: int) -> None:
        """Make `end` the write position after recovery: segments starting past it are deleted."""
        self.files.drop_from(end + 1)
        self._current = self.files.find(end)
        self.write_pos = end
        self.committed_pos = end
        self._ring_start = end  # the ring was zeroed when made ready: it holds what is appended from here
        self._filled.clear()
        self.ring.set_committed(end)
        self.flushed_pos = min(self.flushed_pos, end)

    # --- retention -------------------------------------------------------------------------------------

    def segment_ages(self) -> list[tuple[MappedFile, float]]:
        """(segment, last-modified time) of every segment but the one being written."""
        return [(mapped, os.stat(mapped.path).st_mtime) for mapped in self.files.files[:-1]]

    def delete_first_segment(self) -> MappedFile:
        return self.files.drop_first()

    def close(self) -> None:
        self.files.close()
        self.ring.close()
