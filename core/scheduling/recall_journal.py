"""The recall journal: where the recalls the broker answered OK are kept across a restart (core.scheduling.recalls
holds them in memory). Blocking file I/O, run in a thread by its one caller, which serializes the calls.

Layout: `DATA_DIR/config/recalls.jsonl`, UTF-8 text, one recall a line, each a JSON array
`["<real topic>", "<unique id>", <due ms>]` ended by a newline. A recall is appended in one write (a group of
recalls in one write and one fsync) before its caller is answered; the file is rewritten, atomically (a new file
renamed over it), with only the recalls still needed when some are forgotten, and at each start.

A crash can cut the last write short: a last line without its newline, or lines that do not parse with nothing
readable after them, are a torn tail, dropped (they were never answered: their write had not returned). A line
that does not parse followed by one that does is damage, not a torn write: reading refuses the file.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path

from core.errors import ConfigFileError

log = logging.getLogger(__name__)

RECALL_JOURNAL_FILE = "recalls.jsonl"

Recall = tuple[str, str, int]  # real topic, unique id, due ms


class RecallJournal:
    def __init__(self, path: Path, durable: bool) -> None:
        """`durable`: fsync each write (the store's SYNC_FLUSH); without it a write survives a killed process, not
        a power cut, as the commit log's messages under ASYNC_FLUSH."""
        self.path = path
        self.durable = durable

    def read(self) -> list[Recall]:
        """The recalls in the file, in the order written (none if there is no file); ConfigFileError for damage."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ConfigFileError(self.path, f"cannot be read ({exc})", hint="check the file's permissions") from exc
        lines = raw.split(b"\n")
        # The text after the last newline is a line whose write was cut short (or nothing, after a whole file).
        torn = lines.pop()
        recalls: list[Recall] = []
        bad: int | None = None
        for number, line in enumerate(lines, 1):
            recall = _parse(line)
            if recall is None:
                bad = number if bad is None else bad
                continue
            if bad is not None:
                raise ConfigFileError(
                    self.path,
                    "not a recall (a JSON array of topic, unique id and due ms)",
                    bad,
                    1,
                    hint="restore the file, or delete it to forget every recall of messages still waiting",
                )
            recalls.append(recall)
        if torn or bad is not None:
            log.warning("%s: a write cut short by a crash is dropped (line %d on)", self.path, bad or len(lines) + 1)
        return recalls

    def append(self, recalls: Iterable[Recall]) -> None:
        """Add `recalls` at the end in one write; on disk (under `durable`) when it returns."""
        data = b"".join(_line(recall) for recall in recalls)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                _write_all(fd, data)
                if self.durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as exc:
            raise ConfigFileError(
                self.path, f"cannot be written ({exc})", hint="free space on its disk or check its directory"
            ) from exc

    def rewrite(self, recalls: Iterable[Recall]) -> None:
        """Replace the file with `recalls`, atomically: a crash leaves the old file or the new one."""
        data = b"".join(_line(recall) for recall in recalls)
        tmp = self.path.with_name(self.path.name + ".tmp")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            try:
                _write_all(fd, data)
                if self.durable:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self.path)
            if self.durable and hasattr(os, "O_DIRECTORY"):
                directory = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
                try:
                    os.fsync(directory)
                finally:
                    os.close(directory)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise ConfigFileError(
                self.path, f"cannot be written ({exc})", hint="free space on its disk or check its directory"
            ) from exc


def _line(recall: Recall) -> bytes:
    return json.dumps(list(recall), ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _parse(line: bytes) -> Recall | None:
    try:
        value = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if (
        isinstance(value, list)
        and len(value) == 3
        and isinstance(value[0], str)
        and isinstance(value[1], str)
        and isinstance(value[2], int)
        and not isinstance(value[2], bool)
    ):
        return value[0], value[1], value[2]
    return None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


__all__ = ["RECALL_JOURNAL_FILE", "Recall", "RecallJournal"]
