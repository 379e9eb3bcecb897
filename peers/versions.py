"""What shared state's records have in common (file_versions.py for a directory, entry_versions.py for a table),
free of I/O: the version of a write, which of two writes wins, and the records a batch of writes travels in.

A version is (time, group): the wall-clock nanoseconds at which a node made the write, and its broker group, which
orders two writes of the same nanosecond. The later version wins on every node: last writer wins, as a replicated
key-value store without coordination settles it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

# A record's body stays under this (the core takes 4 MiB): a whole state is sent in as many as it takes.
MAX_RECORD_BYTES = 1024 * 1024


@dataclass(frozen=True, slots=True, order=True)
class Version:
    time_ns: int
    group: str


def later(write: Version, known: Version | None) -> bool:
    """Whether a write at `write` replaces what is known at `known` (equal is the same write, heard again)."""
    return known is None or write > known


def next_version(now_ns: int, group: str, latest: Version | None) -> Version:
    """A new local write's version: now, or just past the latest version known (a clock that stepped back, or
    another node's clock ahead, must not make a new write lose to an older one)."""
    time_ns = now_ns if latest is None else max(now_ns, latest.time_ns + 1)
    return Version(time_ns, group)


def encode_batches(field: str, entries: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """Record bodies {field: [entry, ...]}, each under MAX_RECORD_BYTES (an entry alone larger goes alone)."""
    batch: list[dict[str, Any]] = []
    size = 0
    for entry in entries:
        length = len(json.dumps(entry))
        if batch and size + length > MAX_RECORD_BYTES:
            yield json.dumps({field: batch}).encode()
            batch, size = [], 0
        batch.append(entry)
        size += length
    if batch:
        yield json.dumps({field: batch}).encode()


def decode_batch(field: str, body: bytes) -> list[Any]:
    """The entries of a record body {field: [...]}; ValueError naming what is wrong."""
    try:
        value = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(value, dict) or not isinstance(value.get(field), list):
        raise ValueError(f'expected {{"{field}": [...]}}')
    entries: list[Any] = value[field]
    return entries
