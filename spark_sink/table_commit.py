"""The commit protocol of a sink table: staged batches, the manifest that commits them, and recovery.

Layout of a table root (`path` in the connector config):

    topic=<t>/dt=<yyyy-mm-dd>/b<batch>-part-....parquet   committed data (Hive-style partition directories)
    _mqgate/manifest.json          the commit log: the last committed batch and the next offset of every queue
    _mqgate/manifest.json.tmp      a manifest being written (left over only by a crash; ignored, then removed)
    _mqgate/staging/batch-<n>-<token>/   where Spark writes batch n before it is committed (token: per opening)
    _mqgate/lock                   flock'ed by the sink writing the table

Spark and Hive readers skip names starting with "_" or ".", so `_mqgate/` is invisible to a reader of the table.

manifest.json (UTF-8 JSON, written as tmp + fsync + rename + fsync of the directory, so it is always whole):

    {"format": 2,
     "batch": 42,                           last committed batch (0: none yet)
     "offsets": {"<broker group>/<topic>/<queue id>": 1234, ...},   next queue offset to write, per queue
     "staged": "batch-0000000042-1a2b3c4d",            batch 42's staging directory
     "moving": ["topic=a/dt=2026-11-22/part-00000-....parquet", ...],   its files, relative to that directory
     "schema": {...}, "partition_columns": [...]}    the table's Spark schema, for readers

Format 1 (before broker groups were named) keyed offsets "<topic>/<queue id>": such a key is read as the queue of
the group of the node that opens the table (`open(group)`), and written back with it at once. Open a
table written by a standalone mqgate on that node first, before its connector runs on a cluster.

Committing batch n (`commit`): the staged Parquet files are fsync'ed; the manifest naming batch n, its files and
the queues' new next offsets replaces the old one in one rename (the commit point); then each staged file is
renamed into its partition directory under the name `b<n>-<name>`; then the staging directory is removed.
Opening the table (`open`) finishes what a crash interrupted: the files of the manifest's batch still in staging
are moved into place (roll forward), then every staging directory is deleted (batches that never reached the
commit point, or files an orphaned JVM wrote after its process was killed), and a stray manifest.json.tmp is
removed.

Why no row is lost or written twice, wherever a process dies:
- before the manifest rename: the table and the manifest are as before the batch; the staged files are deleted at
  open; the offsets in the manifest still point at the batch's first records, so the runtime delivers them again.
- after the manifest rename: the batch is committed; open moves whatever files are still in staging, each exactly
  once (a rename either happened or did not, and a moved file is no longer in staging); the offsets point past
  the batch, so its records are not delivered again.
A reader listing the table during the moves (milliseconds), or after a crash during them and before the sink
opens the table again, sees part of the newest batch; never a row twice, never a row of an uncommitted batch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import secrets
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connectors.api import QueueRef
from spark_sink.errors import TableLockedError, TableStateError

log = logging.getLogger(__name__)

META_DIR = "_mqgate"
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 2
# Manifests of these formats are read (1: offsets keyed without the broker group).
READABLE_FORMATS = (1, 2)
DATA_SUFFIX = ".parquet"


def queue_key(queue: QueueRef) -> str:
    if not queue.broker:
        return f"{queue.topic}/{queue.queue_id}"
    return f"{queue.broker}/{queue.topic}/{queue.queue_id}"


def parse_queue_key(key: str) -> QueueRef:
    # Topic names cannot contain "/", so the last two "/" separate the topic and the queue id; what is before them
    # is the broker group (none in a format 1 key).
    parts = key.rsplit("/", 2)
    if len(parts) == 2:
        return QueueRef(parts[0], int(parts[1]))
    return QueueRef(parts[1], int(parts[2]), parts[0])


def named_offsets(offsets: Mapping[str, int], group: str) -> dict[str, int]:
    """Manifest offsets with every key naming its group: a key without one (format 1) is `group`'s queue, unless
    the same queue is also keyed with the group (that one is newer)."""
    named: dict[str, int] = {}
    for key, offset in offsets.items():
        ref = parse_queue_key(key)
        if not ref.broker:
            continue
        named[key] = offset
    for key, offset in offsets.items():
        ref = parse_queue_key(key)
        if not ref.broker:
            named.setdefault(queue_key(ref.in_group(group)), offset)
    return named


@dataclass(slots=True, frozen=True)
class Manifest:
    batch: int
    offsets: dict[str, int]
    staged: str
    moving: tuple[str, ...]
    schema: dict[str, Any] | None
    partition_columns: tuple[str, ...]

    def to_json(self) -> bytes:
        document = {
            "format": MANIFEST_FORMAT,
            "batch": self.batch,
            "offsets": self.offsets,
            "staged": self.staged,
            "moving": list(self.moving),
            "schema": self.schema,
            "partition_columns": list(self.partition_columns),
        }
        return json.dumps(document, sort_keys=True).encode()

    @classmethod
    def from_json(cls, data: bytes, where: Path) -> Manifest:
        try:
            document = json.loads(data)
            if document.get("format") not in READABLE_FORMATS:
                raise ValueError(f"format {document.get('format')!r}, expected one of {READABLE_FORMATS}")
            return cls(
                int(document["batch"]),
                {str(key): int(value) for key, value in document["offsets"].items()},
                str(document["staged"]),
                tuple(document["moving"]),
                document.get("schema"),
                tuple(document.get("partition_columns", ())),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise TableStateError(f"{where}: not a sink manifest ({exc}); restore it or start a new table") from None


EMPTY_MANIFEST = Manifest(0, {}, "", (), None, ())


def read_manifest(root: Path) -> Manifest:
    """The committed state of the table at `root` (empty when nothing was ever committed)."""
    path = root / META_DIR / MANIFEST
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return EMPTY_MANIFEST
    return Manifest.from_json(data, path)


def _fsync_path(path: Path, directory: bool = False) -> None:
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECTORY if directory else 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _data_name(batch: int, name: str) -> str:
    return f"b{batch:010d}-{name}"


class TableCommitter:
    """One sink's handle on a table root: open (lock and recover), stage and commit batches, close."""

    def __init__(self, root: Path, durable: bool = True) -> None:
        self.root = root
        self.meta = root / META_DIR
        self.staging = self.meta / "staging"
        # durable=False skips the fsyncs: still exactly once across process crashes (the page cache survives them),
        # not across a power cut.
        self.durable = durable
        self.manifest = EMPTY_MANIFEST
        self._lock_fd: int | None = None
        # Staging directories are named per opening: the JVM of a process killed a moment ago may still be
        # finishing a job (it exits when it notices its Python is gone), and must not write into ours.
        self._token = secrets.token_hex(4)

    # -- open / close -----------------------------------------------------------------------------------------

    def open(self, group: str = "") -> Manifest:
        """Lock and recover the table (blocking); TableLockedError when another sink holds it. `group`: the broker
        group format 1 offsets stand for (none: they are kept as they are)."""
        self.staging.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.meta / "lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # flock: the kernel releases it when its process dies, however (SIGKILL included), and the fd is not
            # inherited by Spark's JVM (Python's fds are not inheritable), so a dead node never holds it.
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise TableLockedError(
                f"table {self.root} is being written by another Spark sink; give each connector its own path"
            ) from None
        self._lock_fd = fd
        try:
            self.manifest = read_manifest(self.root)
            self._recover()
            named = named_offsets(self.manifest.offsets, group) if group else self.manifest.offsets
            if named != self.manifest.offsets:
                # Named at once, not at the next commit: the task may move to another node before it commits.
                self._write_manifest(dataclasses.replace(self.manifest, offsets=named))
        except BaseException:
            self.close()
            raise
        return self.manifest

    def close(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _recover(self) -> None:
        manifest = self.manifest
        moved = self._move_into_place(manifest.batch, manifest.staged, manifest.moving)
        if moved:
            log.info(
                "table %s: finished committing batch %d (%d files moved into place)", self.root, manifest.batch, moved
            )
        for leftover in sorted(self.staging.iterdir()):
            log.info("table %s: deleting %s, a batch that was never committed", self.root, leftover.name)
            if leftover.is_dir():
                shutil.rmtree(leftover)
            else:
                leftover.unlink()
        with contextlib.suppress(FileNotFoundError):
            (self.meta / (MANIFEST + ".tmp")).unlink()

    # -- batches ----------------------------------------------------------------------------------------------

    def _staged_name(self, batch: int) -> str:
        return f"batch-{batch:010d}-{self._token}"

    def offsets(self) -> dict[QueueRef, int]:
        return {parse_queue_key(key): offset for key, offset in self.manifest.offsets.items()}

    def next_batch(self) -> int:
        return self.manifest.batch + 1

    def staging_dir(self, batch: int) -> Path:
        """An empty directory for batch `batch`'s files (whatever an earlier attempt left there is removed)."""
        directory = self.staging / self._staged_name(batch)
        if directory.exists():
            shutil.rmtree(directory)
        return directory

    def commit(
        self,
        batch: int,
        offsets: Mapping[QueueRef, int],
        schema: dict[str, Any] | None = None,
        partition_columns: Iterable[str] = (),
    ) -> int:
        """Commit the files Spark wrote into `staging_dir(batch)` together with the queues' next offsets;
        returns the number of data files committed."""
        if batch != self.next_batch():
            raise TableStateError(
                f"table {self.root}: batch {batch} committed out of turn (next is {self.next_batch()})"
            )
        staged = self._staged_name(batch)
        directory = self.staging / staged
        files = (
            sorted(str(path.relative_to(directory)) for path in directory.rglob("*" + DATA_SUFFIX) if path.is_file())
            if directory.exists()
            else []
        )
        if self.durable:
            for name in files:
                _fsync_path(directory / name)
            for parent in {(directory / name).parent for name in files}:
                _fsync_path(parent, directory=True)
        self._write_manifest(
            Manifest(
                batch,
                self._merged_offsets(offsets),
                staged,
                tuple(files),
                schema if schema is not None else self.manifest.schema,
                tuple(partition_columns) or self.manifest.partition_columns,
            )
        )
        self._move_into_place(batch, staged, files)
        if directory.exists():
            shutil.rmtree(directory)
        return len(files)

    def commit_offsets(self, offsets: Mapping[QueueRef, int]) -> None:
        """Advance queues' next offsets without data (records the runtime handled otherwise, e.g. dead-lettered)."""
        merged = self._merged_offsets(offsets)
        if merged != self.manifest.offsets:
            manifest = self.manifest
            self._write_manifest(
                Manifest(
                    manifest.batch,
                    merged,
                    manifest.staged,
                    manifest.moving,
                    manifest.schema,
                    manifest.partition_columns,
                )
            )

    def _merged_offsets(self, offsets: Mapping[QueueRef, int]) -> dict[str, int]:
        merged = dict(self.manifest.offsets)
        for queue, offset in offsets.items():
            key = queue_key(queue)
            merged[key] = max(offset, merged.get(key, 0))
        return merged

    def _write_manifest(self, manifest: Manifest) -> None:
        tmp = self.meta / (MANIFEST + ".tmp")
        with open(tmp, "wb") as file:
            file.write(manifest.to_json())
            if self.durable:
                file.flush()
                os.fsync(file.fileno())
        os.replace(tmp, self.meta / MANIFEST)  # the commit point
        if self.durable:
            _fsync_path(self.meta, directory=True)
        self.manifest = manifest

    def _move_into_place(self, batch: int, staged: str, files: Iterable[str]) -> int:
        directory = self.staging / staged
        moved = 0
        touched: set[Path] = set()
        for name in files:
            source = directory / name
            target = self.root / Path(name).parent / _data_name(batch, Path(name).name)
            if not source.exists():
                if not target.exists():
                    raise TableStateError(
                        f"table {self.root}: {target} of committed batch {batch} is missing (deleted by hand?)"
                    )
                continue  # moved before a crash
            if not target.parent.exists():
                target.parent.mkdir(parents=True)
                # New partition directories must reach the disk with their entries in their parents.
                touched.update(parent for parent in target.parent.parents if parent.is_relative_to(self.root))
            os.rename(source, target)
            touched.add(target.parent)
            moved += 1
        if self.durable:
            for parent in touched:
                _fsync_path(parent, directory=True)
        return moved
