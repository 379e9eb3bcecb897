"""A directory whose files are the same on every node of a cluster (EventBridge's rules directory): a file written,
changed or deleted on one node, by an operator or through the API, is written, changed or deleted on every other
node, which then reads it as its own.

- Each node looks at the directory (`scan`, when its watcher sees a change) and gives what changed there a new
  version (file_versions.py), then writes it to every other group as a record of the door's records topic (queue 0
  of each group), applied by that group's node as its store receives it: before the writer's SEND_OK, the file is
  on the other node's disk. A group that could not be told is told again every RETRY_INTERVAL_S until it is.
- The later version of a file wins on every node (last writer wins; a deletion is a version, kept).
- A starting node sends its whole state (hello) and waits, at most JOIN_TIMEOUT_S, for every other node's (state):
  it catches up with what changed while it was down, and the others with what changed on its disk meanwhile.
- What each node knows is kept in `state_file`, so that a restart tells a file changed while the node was down
  (written locally: a new version) from one it wrote itself.

Records (PROPERTY_GROUP: the writer's group; PROPERTY_KIND: what it holds; body: file_versions.encode_writes):
    writes  files written or deleted on the writer's node
    hello   a starting node's whole state; each node that hears it answers with its own
    state   a node's whole state, in answer to a hello
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
from peers.file_versions import FileWrite, Known, decode_writes, digest, encode_writes, valid_name, wins
from peers.group_peers import ClusterPeers
from peers.versions import next_version

log = logging.getLogger(__name__)

PROPERTY_GROUP = "PEER_GROUP"
PROPERTY_KIND = "PEER_FILES"
WRITES, HELLO, STATE = "writes", "hello", "state"
# How long a starting node waits for the others' states before it goes on with what it has.
JOIN_TIMEOUT_S = 5.0
# A group that could not be told of a write is told again this often, until it is.
RETRY_INTERVAL_S = 5.0


class SharedDirectory:
    def __init__(
        self,
        directory: Path,
        accepts: Callable[[str], bool],
        state_file: Path,
        peers: ClusterPeers,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        """`accepts`: whether a file name is one of the shared files (the others in the directory are left alone)."""
        self.directory = Path(directory)
        self.accepts = accepts
        self.state_file = state_file
        self.peers = peers
        self.group = peers.own_group
        self.clock = clock
        # Called after a write from another node was applied here (the door reads the directory again).
        self.changed: Callable[[], None] = lambda: None
        self._known: dict[str, Known] = {}
        self._pending: dict[str, dict[str, FileWrite]] = {}  # group -> file -> the write it has not been told of
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
            self._known = {name: Known.of_json(entry) for name, entry in value["files"].items() if valid_name(name)}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            # Every file on disk then counts as written here now: it wins over older versions elsewhere, and a
            # newer one elsewhere still wins over it.
            log.error("%s: not read (%s); the directory's files are taken as they are", self.state_file, exc)

    async def join(self) -> None:
        """Tell the other nodes this one's whole state and take theirs (at most JOIN_TIMEOUT_S: a node that does not
        answer is down, and it hears this one's state when it starts)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.load()
        self.scan()
        others = await self.peers.other_live_groups()
        failed = await self._send(HELLO, self._whole_state(), others)
        waiting = set(others) - set(failed)
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while waiting - self._states_heard and time.monotonic() < deadline:
            self._heard.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._heard.wait(), deadline - time.monotonic())
        missing = sorted(waiting - self._states_heard) + sorted(failed)
        if missing:
            log.warning("%s: no state from broker group(s) %s; they catch up when they start",
                        self.directory, ", ".join(missing))  # fmt: skip
        self._retrying = asyncio.get_running_loop().create_task(self._retry_periodically())

    async def close(self) -> None:
        if self._retrying is not None:
            self._retrying.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._retrying
        for task in list(self._tasks):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 5)

    # --- this node's writes ---

    def scan(self) -> list[FileWrite]:
        """The files written, changed or deleted here since last looked at, each given a new version (and taken as
        known). Cheap when nothing changed: a stat per file."""
        found: dict[str, Path] = {}
        if self.directory.is_dir():
            for path in self.directory.iterdir():
                if self.accepts(path.name) and valid_name(path.name) and path.is_file():
                    found[path.name] = path
        writes = []
        for name in sorted(set(found) | {name for name, known in self._known.items() if known.digest is not None}):
            write = self._scan_one(name)
            if write is not None:
                writes.append(write)
        if writes:
            self._save()
        return writes

    async def publish(self, writes: list[FileWrite]) -> list[str]:
        """Tell every other live group of `writes`; the groups that could not be told (they are told again every
        RETRY_INTERVAL_S)."""
        if not writes:
            return []
        others = await self.peers.other_live_groups()
        failed = await self._send(WRITES, writes, others)
        for group in failed:
            pending = self._pending.setdefault(group, {})
            pending.update((write.name, write) for write in writes)
        return failed

    def _scan_one(self, name: str) -> FileWrite | None:
        path = self.directory / name
        known = self._known.get(name)
        try:
            stat = path.stat()
        except FileNotFoundError:
            if known is None or known.digest is None:
                return None
            version = next_version(self.clock(), self.group, known.version)
            self._known[name] = Known(version, None, None)
            return FileWrite(name, version, None)
        seen = (stat.st_mtime_ns, stat.st_size)
        if known is not None and known.stat == seen:
            return None
        try:
            content = path.read_bytes()
        except OSError as exc:
            log.warning("%s: not read (%s); looked at again at the next change", path, exc)
            return None
        found = digest(content)
        if known is not None and known.digest == found:
            self._known[name] = Known(known.version, found, seen)  # touched, not changed
            return None
        version = next_version(self.clock(), self.group, known.version if known is not None else None)
        self._known[name] = Known(version, found, seen)
        return FileWrite(name, version, content)

    def _whole_state(self) -> list[FileWrite]:
        writes = []
        for name, known in sorted(self._known.items()):
            content = None
            if known.digest is not None:
                try:
                    content = (self.directory / name).read_bytes()
                except OSError:
                    continue  # gone since the scan: the next scan versions its deletion
            writes.append(FileWrite(name, known.version, content))
        return writes

    # --- the other nodes' writes ---

    def record_stored(self, message: Message) -> None:
        """A record of the door's records topic reached this group's store (the stored listener, before its writer's
        SEND_OK)."""
        properties = message.properties
        kind, group = properties.get(PROPERTY_KIND), properties.get(PROPERTY_GROUP)
        if kind not in (WRITES, HELLO, STATE) or group is None or group == self.group:
            return
        try:
            writes = decode_writes(bytes(message.body))
        except ValueError as exc:
            log.error("a shared-file record from broker group %s could not be read (%s): skipped", group, exc)
            return
        self.peers.heard(group)
        applied = [write for write in writes if self._apply(write)]
        if applied:
            self._save()
            log.info("%s: %s from broker group %s", self.directory,
                     ", ".join(f"{w.name} {'deleted' if w.content is None else 'written'}" for w in applied),
                     group)  # fmt: skip
            self.changed()
        if kind == HELLO:
            self._spawn(self._answer(group))
        elif kind == STATE:
            self._states_heard.add(group)
            self._heard.set()

    def _apply(self, write: FileWrite) -> bool:
        if not self.accepts(write.name):
            log.warning("%s: %r from another node is not a shared file here; skipped", self.directory, write.name)
            return False
        local = self._scan_one(write.name)  # a change made here and not yet looked at is a write too
        if local is not None:
            self._spawn(self._publish_later([local]))
        if not wins(write.version, self._known.get(write.name)):
            return False
        path = self.directory / write.name
        if write.content is None:
            path.unlink(missing_ok=True)
            self._known[write.name] = Known(write.version, None, None)
            return True
        self.directory.mkdir(parents=True, exist_ok=True)
        temporary = self.directory / f".{write.name}.peer-tmp"  # hidden: never read as a rule file
        temporary.write_bytes(write.content)
        os.replace(temporary, path)
        stat = path.stat()
        self._known[write.name] = Known(write.version, digest(write.content), (stat.st_mtime_ns, stat.st_size))
        return True

    async def _answer(self, group: str) -> None:
        self.scan()
        await self._send(STATE, self._whole_state(), [group])

    async def _publish_later(self, writes: list[FileWrite]) -> None:
        await self.publish(writes)

    # --- records ---

    async def _send(self, kind: str, writes: Iterable[FileWrite], groups: list[str]) -> list[str]:
        """Write `writes` as records of `kind` to `groups`; the groups that could not be told."""
        if not groups:
            return []
        bodies = list(encode_writes(writes)) or [json.dumps({"files": []}).encode()]
        failed: set[str] = set()
        for body in bodies:
            properties = {PROPERTY_GROUP: self.group, PROPERTY_KIND: kind}
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
        temporary.write_text(json.dumps({"files": {name: known.to_json() for name, known in self._known.items()}}))
        os.replace(temporary, self.state_file)

    def known(self) -> dict[str, Known]:
        return dict(self._known)
