"""A keyed table of JSON entries that is the same on every node of a cluster (the connectors' configs): an entry
written or deleted on one node is written or deleted on every other.

- A local write gets a new version (entry_versions.py, after versions.next_version) and is applied here, then
  written to every other live group as a record of the door's records topic (queue 0 of each group), applied by
  that group's node as its store receives it: before the writer's SEND_OK, the entry is in the other node's table.
  A group that could not be told is told again every RETRY_INTERVAL_S until it is.
- The later version of an entry wins on every node (last writer wins; a deletion is a version, kept).
- A starting node sends its whole table (hello) and waits, at most JOIN_TIMEOUT_S, for every other node's (state):
  it catches up with what changed while it was down, and the others with what it holds.
- The entries and their versions are kept in `state_file` (JSON, replaced atomically), so a restart keeps them.

Several tables may share one records topic: PROPERTY_TABLE names the table a record is for.

Records (PROPERTY_GROUP: the writer's group; PROPERTY_TABLE: the table; PROPERTY_KIND: what it holds; body:
entry_versions.encode_entries):
    writes  entries written or deleted on the writer's node
    hello   a starting node's whole table; each node that hears it answers with its own
    state   a node's whole table, in answer to a hello
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any

from core import Message
from peers.entry_versions import EntryWrite, apply, decode_entries, encode_entries, live
from peers.group_peers import ClusterPeers
from peers.versions import next_version

log = logging.getLogger(__name__)

PROPERTY_GROUP = "PEER_GROUP"
PROPERTY_TABLE = "PEER_TABLE"
PROPERTY_KIND = "PEER_ENTRIES"
WRITES, HELLO, STATE = "writes", "hello", "state"
# How long a starting node waits for the others' states before it goes on with what it has (as shared_directory).
JOIN_TIMEOUT_S = 5.0
# A group that could not be told of a write is told again this often, until it is.
RETRY_INTERVAL_S = 5.0


class SharedTable:
    def __init__(
        self, peers: ClusterPeers, name: str, state_file: Path, clock: Callable[[], int] = time.time_ns
    ) -> None:
        self.peers = peers
        self.name = name
        self.state_file = state_file
        self.group = peers.own_group
        self.clock = clock
        # Called with each entry another node's write changed here (key, value or None), as its record is stored.
        self.changed: Callable[[str, Any], None] = lambda key, value: None
        self._known: dict[str, EntryWrite] = {}
        self._pending: dict[str, dict[str, EntryWrite]] = {}  # group -> key -> the write it has not been told of
        self._states_heard: set[str] = set()
        self._heard = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._retrying: asyncio.Task[None] | None = None

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
        """Tell the other nodes this one's whole table and take theirs (at most JOIN_TIMEOUT_S: a node that does not
        answer is down, and it hears this one's table when it starts)."""
        self.load()
        others = await self.peers.other_live_groups()
        failed = await self._send(HELLO, self._known.values(), others)
        waiting = set(others) - set(failed)
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while waiting - self._states_heard and time.monotonic() < deadline:
            self._heard.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._heard.wait(), deadline - time.monotonic())
        missing = sorted(waiting - self._states_heard) + sorted(failed)
        if missing:
            log.warning("table %s: no state from broker group(s) %s; they catch up when they start",
                        self.name, ", ".join(missing))  # fmt: skip
        self._retrying = asyncio.get_running_loop().create_task(self._retry_periodically())

    async def close(self) -> None:
        if self._retrying is not None:
            self._retrying.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retrying
        for task in list(self._tasks):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 5)

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
        (told again every RETRY_INTERVAL_S)."""
        known = self._known.get(key)
        write = EntryWrite(key, next_version(self.clock(), self.group, known.version if known else None), value)
        apply(self._known, [write])
        self._save()
        others = await self.peers.other_live_groups()
        failed = await self._send(WRITES, [write], others)
        for group in failed:
            self._pending.setdefault(group, {})[key] = write
        return failed

    # --- the other nodes' writes ---

    def record_stored(self, message: Message) -> None:
        """A record of the door's records topic reached this group's store (the stored listener, before its writer's
        SEND_OK)."""
        properties = message.properties
        kind, group = properties.get(PROPERTY_KIND), properties.get(PROPERTY_GROUP)
        if properties.get(PROPERTY_TABLE) != self.name or kind not in (WRITES, HELLO, STATE):
            return
        if group is None or group == self.group:
            return
        try:
            writes = decode_entries(bytes(message.body))
        except ValueError as exc:
            log.error("a record of table %s from broker group %s could not be read (%s): skipped",
                      self.name, group, exc)  # fmt: skip
            return
        self.peers.heard(group)
        applied = apply(self._known, writes)
        if applied:
            self._save()
            log.info("table %s: %s from broker group %s", self.name,
                     ", ".join(f"{w.key} {'deleted' if w.deleted else 'written'}" for w in applied), group)  # fmt: skip
            for write in applied:
                try:
                    self.changed(write.key, write.value)
                except Exception:
                    log.exception("table %s: applying %s failed", self.name, write.key)
        if kind == HELLO:
            self._spawn(self._send_state(group))
        elif kind == STATE:
            self._states_heard.add(group)
            self._heard.set()

    async def _send_state(self, group: str) -> None:
        await self._send(STATE, list(self._known.values()), [group])

    # --- records ---

    async def _send(self, kind: str, writes: Iterable[EntryWrite], groups: list[str]) -> list[str]:
        """Write `writes` as records of `kind` to `groups`; the groups that could not be told."""
        if not groups:
            return []
        bodies = list(encode_entries(writes)) or [json.dumps({"entries": []}).encode()]
        failed: set[str] = set()
        for body in bodies:
            properties = {PROPERTY_GROUP: self.group, PROPERTY_TABLE: self.name, PROPERTY_KIND: kind}
            failed.update(await self.peers.broadcast(Message(self.peers.topic, body, properties=properties), groups))
        return sorted(failed)

    async def _retry_periodically(self) -> None:
        while True:
            await asyncio.sleep(RETRY_INTERVAL_S)
            for group, pending in list(self._pending.items()):
                with contextlib.suppress(Exception):
                    told = not await self._send(WRITES, list(pending.values()), [group])
                    if told and self._pending.get(group) is pending:
                        del self._pending[group]

    def _spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _save(self) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        temporary = self.state_file.with_name(self.state_file.name + ".tmp")
        temporary.write_text(json.dumps({"entries": [write.to_json() for write in self._known.values()]}))
        os.replace(temporary, self.state_file)
