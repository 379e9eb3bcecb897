"""The versions of a shared directory's files (shared_directory.py), free of I/O: what each node knows of each file,
which of two writes of one file wins, and the records that carry them.

A version is versions.Version (time, group): the wall-clock nanoseconds at which a node saw the file written (or
deleted) there, and its broker group. The later version wins everywhere (last writer wins). A deletion is a version
too (a tombstone, kept): a node that was down while a file was deleted elsewhere deletes its copy when it hears of
it, rather than write it back.

Record body (JSON): {"files": [{"name", "time", "group", "content": base64 | null}]}; null content is a deletion.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from peers.versions import Version, decode_batch, encode_batches, later


@dataclass(frozen=True, slots=True)
class FileWrite:
    """A file of the directory as written (content) or deleted (None) at `version`."""

    name: str
    version: Version
    content: bytes | None

    def to_json(self) -> dict[str, Any]:
        content = None if self.content is None else base64.b64encode(self.content).decode()
        return {"name": self.name, "time": self.version.time_ns, "group": self.version.group, "content": content}

    @classmethod
    def of_json(cls, value: Any) -> FileWrite:
        if not isinstance(value, dict):
            raise ValueError("a file entry is not an object")
        name, time_ns, group, content = value.get("name"), value.get("time"), value.get("group"), value.get("content")
        if not isinstance(name, str) or not valid_name(name):
            raise ValueError(f"file name {name!r} is not a plain file name")
        if not isinstance(time_ns, int) or not isinstance(group, str):
            raise ValueError(f"file {name!r}: no version")
        if content is not None and not isinstance(content, str):
            raise ValueError(f"file {name!r}: content is not base64 text")
        try:
            data = None if content is None else base64.b64decode(content, validate=True)
        except binascii.Error as exc:
            raise ValueError(f"file {name!r}: content is not base64 ({exc})") from None
        return cls(name, Version(time_ns, group), data)


@dataclass(frozen=True, slots=True)
class Known:
    """What a node knows of one file: the version in force, the content's digest (None: deleted), and the size and
    modification time of its copy on disk when it was last looked at (a copy that differs was written locally)."""

    version: Version
    digest: str | None
    stat: tuple[int, int] | None = None  # (mtime_ns, size)

    def to_json(self) -> dict[str, Any]:
        return {"time": self.version.time_ns, "group": self.version.group, "digest": self.digest,
                "stat": list(self.stat) if self.stat is not None else None}  # fmt: skip

    @classmethod
    def of_json(cls, value: dict[str, Any]) -> Known:
        stat = value.get("stat")
        return cls(
            Version(int(value["time"]), str(value["group"])),
            value.get("digest"),
            (int(stat[0]), int(stat[1])) if stat else None,
        )


def digest(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def valid_name(name: str) -> bool:
    """A plain, visible file name: no directory part, so a record cannot write outside the directory."""
    return bool(name) and "/" not in name and "\\" not in name and "\x00" not in name and not name.startswith(".")


def wins(write: Version, known: Known | None) -> bool:
    """Whether a write at `write` replaces what is known (later wins; equal is the same write, heard again)."""
    return later(write, known.version if known is not None else None)


def encode_writes(writes: Iterable[FileWrite]) -> Iterator[bytes]:
    """The bodies of the records carrying `writes`, each under versions.MAX_RECORD_BYTES."""
    return encode_batches("files", (write.to_json() for write in writes))


def decode_writes(body: bytes) -> list[FileWrite]:
    """The writes of a record; ValueError naming what is wrong."""
    return [FileWrite.of_json(entry) for entry in decode_batch("files", body)]
