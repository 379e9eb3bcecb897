"""A keyed table of JSON entries that is the same on every node of a cluster (the connectors' configs): an entry
written or deleted on one node is written or deleted on every other.

- A local write gets a new version (entry_versions.py, after versions.next_version) and is applied here, then
  told to every other live group (shared_records.py: applied there before the writer's SEND_OK, told again until
  told, a starting node's hello answered with the others' whole tables).
- The later version of an entry wins on every node (last writer wins; a deletion is a version, kept).
- The entries and their versions are kept in `state_file` (JSON, replaced atomically), so a restart keeps them.

Several tables may share one records topic: PROPERTY_TABLE names the table a record is for. Records:
shared_records.py's, PROPERTY_KIND their kind, the body entry_versions.encode_entries.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from peers.entry_versions import EntryWrite, apply, decode_entries, encode_entries, live
from peers.group_peers import ClusterPeers
from peers.shared_records import SharedRecords, replace_file
from peers.versions import next_version

log = logging.getLogger(__name__)

PROPERTY_TABLE = "PEER_TABLE"
PROPERTY_KIND = "PEER_ENTRIES"


class SharedTable(SharedRecords[EntryWrite]):
    def __init__(
        self, peers: ClusterPeers, name: str, state_file: Path, clock: Callable[[], int] = time.time_ns
    ) -> None:
        super().__init__(peers, PROPERTY_KIND, "entries", f"table {name}", {PROPERTY_TABLE: name})
        self.name = name
        self.state_file = state_file
        self.clock = clock
        # Called with each entry another node's write changed here (key, value or None), as its record is stored.
        self.changed: Callable[[str, Any], None] = lambda key, value: None
        self._known: dict[str, EntryWrite] = {}

    # --- life cycle ---

    def load(self) -> None:
        if not self.state_file.exists():
            return
        try:
            value = json.loads(self.state_file.read_text())
            self._known = {entry.key: entry for entry in map(EntryWrite.of_json, value["entries"])}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # The other nodes' states at join give it back; what only this node held is lost.
            log.error("%s: not read (%s); the table starts empty here", self.state_file, exc)

    async def join(self) -> None:
        """Read the table kept here, tell the other nodes all of it and take theirs (SharedRecords.join_peers)."""
        self.load()
        await self.join_peers()

    # --- reading ---

    def entries(self) -> dict[str, Any]:
        """The values in force, by key."""
        return live(self._known)

    def get(self, key: str) -> Any:
        write = self._known.get(key)
        return None if write is None else write.value

    def known(self) -> dict[str, EntryWrite]:
        """Every entry with its version, deletions included."""
        return dict(self._known)

    # --- this node's writes ---

    async def put(self, key: str, value: Any) -> list[str]:
        """Write `value` (JSON; None deletes) here and on every other live group; the groups that could not be told
        (told again every shared_records.RETRY_INTERVAL_S)."""
        known = self._known.get(key)
        write = EntryWrite(key, next_version(self.clock(), self.group, known.version if known else None), value)
        apply(self._known, [write])
        self._save()
        return await self.tell([write])

    # --- SharedRecords ---

    def encode(self, writes: Iterable[EntryWrite]) -> Iterator[bytes]:
        return encode_entries(writes)

    def decode(self, body: bytes) -> list[EntryWrite]:
        return decode_entries(body)

    def key_of(self, write: EntryWrite) -> str:
        return write.key

    def whole_state(self) -> list[EntryWrite]:
        return list(self._known.values())

    def receive(self, writes: list[EntryWrite], group: str) -> None:
        applied = apply(self._known, writes)
        if not applied:
            return
        self._save()
        log.info("table %s: %s from broker group %s", self.name,
                 ", ".join(f"{w.key} {'deleted' if w.deleted else 'written'}" for w in applied), group)  # fmt: skip
        for write in applied:
            try:
                self.changed(write.key, write.value)
            except Exception:
                log.exception("table %s: applying %s failed", self.name, write.key)

    def _save(self) -> None:
        replace_file(self.state_file, json.dumps({"entries": [write.to_json() for write in self._known.values()]}))
