"""The epochs of a broker group's commit log (RocketMQ's EpochFileCache, its `epochFileCheckpoint`): one entry per
master epoch, the commit-log offset where that epoch's writes begin. An epoch ends where the next begins (the last
at the log's end). Two brokers of a group compare their entries to find how much of their logs they share: the
start of automatic failover's truncation, which keeps logs from diverging (a returning master or a slave cuts its
log to the last point it shares with the new master before it copies again).

On disk, `DATA_DIR/store/epochs`: a line `epoch start_offset` per entry, then `crc32 <hex>` of the lines before it;
written whole to a temporary file, synced, and renamed over the old one, so a crash leaves one or the other.
"""

from __future__ import annotations

import itertools
import os
import threading
import zlib
from collections.abc import Sequence
from pathlib import Path

from core.store.errors import StoreError

EPOCH_FILE = "epochs"

Entry = tuple[int, int]  # (epoch, start offset)


class EpochFileError(StoreError):
    """The epoch file cannot be read (damaged), or an entry does not follow the last."""


def consistent_offset(ours: Sequence[Entry], our_end: int, theirs: Sequence[Entry], their_end: int) -> int:
    """How far two logs are the same: the end, within the latest epoch both hold from the same start offset, of the
    shorter of the two (RocketMQ's findConsistentPoint); -1 when they share no epoch. Pure."""
    their_start = dict(theirs)
    for index in range(len(ours) - 1, -1, -1):
        epoch, start = ours[index]
        if their_start.get(epoch) != start:
            continue
        mine = ours[index + 1][1] if index + 1 < len(ours) else our_end
        position = [e for e, _ in theirs].index(epoch)
        other = theirs[position + 1][1] if position + 1 < len(theirs) else their_end
        return min(mine, other)
    return -1


class EpochFile:
    def __init__(self, store_dir: Path) -> None:
        self.path = Path(store_dir) / EPOCH_FILE
        self._lock = threading.Lock()
        self._entries: list[Entry] = []

    def load(self) -> list[Entry]:
        if not self.path.exists():
            self._entries = []
            return []
        text = self.path.read_text(encoding="ascii", errors="replace")
        *lines, trailer = text.rstrip("\n").split("\n") if text.strip() else [""]
        body = "".join(line + "\n" for line in lines)
        if trailer != f"crc32 {zlib.crc32(body.encode()):08x}":
            raise EpochFileError(f"{self.path}: its checksum does not match its entries; restore it from a copy")
        entries: list[Entry] = []
        for number, line in enumerate(lines, 1):
            parts = line.split()
            if len(parts) != 2 or not all(part.isdigit() for part in parts):
                raise EpochFileError(f"{self.path}:{number}: expected 'epoch start_offset', got {line!r}")
            entries.append((int(parts[0]), int(parts[1])))
        _check_order(entries, self.path)
        self._entries = entries
        return list(entries)

    @property
    def entries(self) -> list[Entry]:
        with self._lock:
            return list(self._entries)

    def last(self) -> Entry | None:
        with self._lock:
            return self._entries[-1] if self._entries else None

    def append(self, epoch: int, start_offset: int) -> None:
        """A new epoch begins at `start_offset`: its epoch is above the last's, its start not below."""
        with self._lock:
            entries = [*self._entries, (epoch, start_offset)]
            _check_order(entries, self.path)
            self._write(entries)

    def replace(self, entries: Sequence[Entry]) -> None:
        """Hold `entries` (the new master's epochs, once this log agrees with them) in place of this file's."""
        with self._lock:
            _check_order(entries, self.path)
            self._write(list(entries))

    def truncate_from(self, offset: int) -> None:
        """The log is cut at `offset`: the epochs that begin there or later go, as RocketMQ's
        truncateSuffixByOffset."""
        with self._lock:
            self._write([entry for entry in self._entries if entry[1] < offset])

    def _write(self, entries: list[Entry]) -> None:
        body = "".join(f"{epoch} {start}\n" for epoch, start in entries)
        text = body + f"crc32 {zlib.crc32(body.encode()):08x}\n"
        temporary = self.path.with_name(self.path.name + ".tmp")
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, text.encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, self.path)
        directory = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        self._entries = entries


def _check_order(entries: Sequence[Entry], path: Path) -> None:
    for (epoch, start), (next_epoch, next_start) in itertools.pairwise(entries):
        if next_epoch <= epoch or next_start < start:
            raise EpochFileError(
                f"{path}: epoch {next_epoch} from offset {next_start} does not follow epoch {epoch} from {start}"
            )
