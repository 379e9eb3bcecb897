"""Atomic JSON config files, as RocketMQ's ConfigManager and MixAll.string2File keep topics.json and friends.

A write never leaves a half-written file under the real name:

1. the new text goes to `<name>.tmp`, which is fsynced;
2. the current file, if any, becomes `<name>.bak` (a hard link, so no copy is written);
3. `<name>.tmp` is renamed over `<name>` (atomic on POSIX) and the directory is fsynced so the rename survives
   a power cut.

A crash before step 3 leaves the old file in place and a stale `.tmp` that readers ignore and the next write
replaces. Reading falls back to `.bak` only when the main file is missing or empty (RocketMQ's loadBak);
a malformed file is refused with its line and column: starting with an empty table would silently drop every
topic or make every consumer start over.

The files that hold a table also carry a `dataVersion` stamp ({"timestamp": ms, "counter": n}) that changes with
every change of the table; `DataVersion` is that stamp.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from core.errors import ConfigFileError

log = logging.getLogger(__name__)


def _sibling(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def backup_path(path: Path) -> Path:
    return _sibling(path, ".bak")


def _fsync_directory(directory: Path) -> None:
    if not hasattr(os, "O_DIRECTORY"):  # Windows cannot open a directory; its renames are journaled by NTFS
        return
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_synced(path: Path, data: bytes, durable: bool = True) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def _keep_backup(path: Path, backup: Path) -> None:
    backup.unlink(missing_ok=True)
    try:
        os.link(path, backup)
    except OSError:
        # Some file systems (FAT, certain network mounts) have no hard links; copy the bytes instead.
        shutil.copyfile(path, backup)


def write_json(path: Path, data: object, durable: bool = True) -> None:
    """Replace `path` with `data` as JSON, atomically; the previous version stays in `path.bak`.

    `durable=False` skips the fsyncs: the file survives a killed process (the page cache stays) but maybe not a
    power cut, as a commit log under ASYNC_FLUSH; for progress written every second that a crash may repeat.

    Callers serialize writes to one path (the managers hold a lock); two concurrent writers would share `.tmp`.
    A file that cannot be written (disk full, a directory missing or read-only) raises ConfigFileError, with the
    OSError as its cause: callers of the broker catch the core's errors only.
    """
    # Encode first: a value that is not JSON must fail before any file is touched.
    text = json.dumps(data, indent=4, ensure_ascii=False) + "\n"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = _sibling(path, ".tmp")
        try:
            _write_synced(tmp, text.encode("utf-8"), durable)
            if path.exists():
                _keep_backup(path, backup_path(path))
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        if durable:
            _fsync_directory(path.parent)
    except OSError as exc:
        raise ConfigFileError(
            path, f"cannot be written ({exc})", hint="free space on its disk or check its directory"
        ) from exc


def _decode(path: Path, raw: bytes, hint: str) -> object:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        raise ConfigFileError(path, f"not UTF-8 text ({exc.reason})", line, column, hint) from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigFileError(path, exc.msg, exc.lineno, exc.colno, hint) from exc


def _read_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def read_json(path: Path) -> object | None:
    """The decoded content of `path`, of `path.bak` when `path` is missing or empty, or None when neither exists.

    Raises ConfigFileError for a file that is not valid JSON, naming the line and column.
    """
    backup = backup_path(path)
    raw = _read_bytes(path)
    if raw is not None and raw.strip():
        hint = f"fix or delete the file (a backup is in {backup.name})" if backup.exists() else "fix or delete the file"
        return _decode(path, raw, hint)
    backup_raw = _read_bytes(backup)
    if backup_raw is None:
        if raw is None:
            return None
        raise ConfigFileError(path, "the file is empty and there is no backup", 1, 1, "delete it to start empty")
    state = "is missing" if raw is None else "is empty"
    if not backup_raw.strip():
        raise ConfigFileError(
            backup, f"the backup is empty and {path.name} {state}", 1, 1, "delete both to start empty"
        )
    log.warning("%s %s; loading the previous version from %s", path, state, backup)
    return _decode(backup, backup_raw, f"fix it, or delete it and {path.name} to start empty")


@dataclass(slots=True, frozen=True)
class DataVersion:
    """RocketMQ's DataVersion: when a table last changed (ms since the epoch) and how many changes it has seen."""

    timestamp: int = 0
    counter: int = 0

    def next(self) -> DataVersion:
        return DataVersion(timestamp=time.time_ns() // 1_000_000, counter=self.counter + 1)

    def to_json(self) -> dict[str, int]:
        return {"timestamp": self.timestamp, "counter": self.counter}

    @classmethod
    def from_json(cls, path: Path, value: object) -> DataVersion:
        """Decode the `dataVersion` member of `path`; a missing member (None) is version zero."""
        if value is None:
            return cls()
        if not isinstance(value, dict):
            raise ConfigFileError(path, f"dataVersion must be an object, found {type(value).__name__}")
        fields = {}
        for name in ("timestamp", "counter"):
            number = value.get(name, 0)
            if not isinstance(number, int) or isinstance(number, bool) or number < 0:
                raise ConfigFileError(path, f"dataVersion.{name} must be a non-negative integer, found {number!r}")
            fields[name] = number
        return cls(**fields)


def read_table(path: Path, table_key: str) -> tuple[dict[str, object], DataVersion] | None:
    """Read a RocketMQ-style table file `{table_key: {name: entry}, "dataVersion": {...}}`; None when absent."""
    content = read_json(path)
    if content is None:
        return None
    if not isinstance(content, dict):
        raise ConfigFileError(path, f"the top level must be a JSON object, found {type(content).__name__}")
    table = content.get(table_key, {})
    if not isinstance(table, dict):
        raise ConfigFileError(path, f"{table_key} must be a JSON object, found {type(table).__name__}")
    return table, DataVersion.from_json(path, content.get("dataVersion"))
