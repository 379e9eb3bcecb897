"""The versions of a shared table's entries (shared_table.py), free of I/O: which of two writes of one key wins, what
a node holds after hearing any writes in any order, and the records that carry them.

A version is versions.Version, (time, group): the wall-clock nanoseconds at which a node wrote the entry and
its broker group. The later version wins on every node (last writer wins); a deletion is a version too (a
tombstone, kept), so a node that was down while a key was deleted elsewhere deletes it when it hears of it rather
than write it back. Applying writes is commutative and idempotent: every node that heard the same writes, in any
order, holds the same entries.

Record body (JSON): {"entries": [{"key", "time", "group", "value": any JSON | null}]}; null value is a deletion.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from peers.versions import Version, decode_batch, encode_batches, later


@dataclass(frozen=True, slots=True)
class EntryWrite:
    """An entry as written (value) or deleted (None) at `version`."""

    key: str
    version: Version
    value: Any

    @property
    def deleted(self) -> bool:
        return self.value is None

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "time": self.version.time_ns, "group": self.version.group, "value": self.value}

    @classmethod
    def of_json(cls, value: Any) -> EntryWrite:
        if not isinstance(value, dict):
            raise ValueError("an entry is not an object")
        key, time_ns, group = value.get("key"), value.get("time"), value.get("group")
        if not isinstance(key, str) or not key:
            raise ValueError(f"entry key {key!r} is not a non-empty string")
        if not isinstance(time_ns, int) or not isinstance(group, str):
            raise ValueError(f"entry {key!r}: no version")
        return cls(key, Version(time_ns, group), value.get("value"))


def wins(write: Version, known: EntryWrite | None) -> bool:
    """Whether a write at `write` replaces what is known (later wins; equal is the same write, heard again)."""
    return later(write, known.version if known is not None else None)


def apply(known: dict[str, EntryWrite], writes: Iterable[EntryWrite]) -> list[EntryWrite]:
    """Apply `writes` to `known` in place; the writes that won (in the order given)."""
    applied = []
    for write in writes:
        if wins(write.version, known.get(write.key)):
            known[write.key] = write
            applied.append(write)
    return applied


def live(known: Mapping[str, EntryWrite]) -> dict[str, Any]:
    """The values in force (tombstones left out)."""
    return {key: write.value for key, write in known.items() if write.value is not None}


def encode_entries(writes: Iterable[EntryWrite]) -> Iterator[bytes]:
    """The bodies of the records carrying `writes`, each under versions.MAX_RECORD_BYTES."""
    return encode_batches("entries", (write.to_json() for write in writes))


def decode_entries(body: bytes) -> list[EntryWrite]:
    """The writes of a record; ValueError naming what is wrong."""
    return [EntryWrite.of_json(entry) for entry in decode_batch("entries", body)]
