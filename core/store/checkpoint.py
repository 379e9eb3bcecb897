"""The store checkpoint: positions known to be on disk, so recovery after a crash scans only what came later.

The file holds two 64-byte slots, written alternately; a torn write can spoil at most the slot being written,
and load takes the valid slot with the higher sequence number. Slot layout (big-endian):

    offset  size  field
    0       4     magic
    4       4     crc32 of bytes [8, 64)
    8       8     sequence
    16      8     commit_log_flushed     every commit-log byte below it was fdatasync'ed
    24      8     dispatched             every record below it has its consume-queue entries on disk
    32      8     index_flushed          every record at or below it is in an index file on disk
    40      8     commit_log_timestamp   store time of the last flushed record (ms), informational
    48      16    reserved (zero)
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from core.store.log.checksum import crc32

_SLOT = struct.Struct(">IIqqqqq16x")
SLOT_SIZE = _SLOT.size
assert SLOT_SIZE == 64
_MAGIC = 0x4D514743  # "MQGC"


@dataclass(slots=True, frozen=True)
class Checkpoint:
    commit_log_flushed: int = 0
    dispatched: int = 0
    index_flushed: int = 0
    commit_log_timestamp: int = 0


class CheckpointFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._sequence = 0
        self._fd = -1

    def load(self) -> Checkpoint:
        """The newest valid checkpoint, or zeros for a new store."""
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        data = os.pread(self._fd, 2 * SLOT_SIZE, 0)
        best: tuple[int, Checkpoint] | None = None
        for slot in range(2):
            raw = data[slot * SLOT_SIZE : (slot + 1) * SLOT_SIZE]
            if len(raw) < SLOT_SIZE:
                continue
            magic, crc, sequence, flushed, dispatched, index, stamp = _SLOT.unpack(raw)
            if magic != _MAGIC or crc != crc32(raw[8:]):
                continue
            if best is None or sequence > best[0]:
                best = (sequence, Checkpoint(flushed, dispatched, index, stamp))
        if best is None:
            return Checkpoint()
        self._sequence = best[0]
        return best[1]

    def save(self, checkpoint: Checkpoint) -> None:
        self._sequence += 1
        body = _SLOT.pack(
            _MAGIC,
            0,
            self._sequence,
            checkpoint.commit_log_flushed,
            checkpoint.dispatched,
            checkpoint.index_flushed,
            checkpoint.commit_log_timestamp,
        )
        slot = body[:4] + crc32(body[8:]).to_bytes(4, "big") + body[8:]
        os.pwrite(self._fd, slot, (self._sequence % 2) * SLOT_SIZE)
        os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
