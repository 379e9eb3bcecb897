"""A directory whose files are the same on every node of a cluster (EventBridge's rules directory): a file written,
changed or deleted on one node, by an operator or through the API, is written, changed or deleted on every other
node, which then reads it as its own.

- Each node looks at the directory (`scan`, when its watcher sees a change) and gives what changed there a new
  version (file_versions.py), then tells every other group (shared_records.py: on the other node's disk before the
  writer's SEND_OK, told again until told, a starting node's hello answered with the others' whole states, so it
  catches up with what changed while it was down, and the others with what changed on its disk meanwhile).
- The later version of a file wins on every node (last writer wins; a deletion is a version, kept).
- What each node knows is kept in `state_file`, so that a restart tells a file changed while the node was down
  (written locally: a new version) from one it wrote itself.

Records: shared_records.py's, PROPERTY_KIND their kind, the body file_versions.encode_writes.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from peers.file_versions import FileWrite, Known, decode_writes, digest, encode_writes, valid_name, wins
from peers.group_peers import ClusterPeers
from peers.shared_records import SharedRecords, replace_file
from peers.versions import next_version

log = logging.getLogger(__name__)

PROPERTY_KIND = "PEER_FILES"


class SharedDirectory(SharedRecords[FileWrite]):
    def __init__(
        self,
        directory: Path,
        accepts: Callable[[str], bool],
        state_file: Path,
        peers: ClusterPeers,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        """`accepts`: whether a file name is one of the shared files (the others in the directory are left alone)."""
        super().__init__(peers, PROPERTY_KIND, "files", str(directory))
        self.directory = Path(directory)
        self.accepts = accepts
        self.state_file = state_file
        self.clock = clock
        # Called after a write from another node was applied here (the door reads the directory again).
        self.changed: Callable[[], None] = lambda: None
        self._known: dict[str, Known] = {}

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
        """Look at the directory, tell the other nodes this one's whole state and take theirs
        (SharedRecords.join_peers)."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self.load()
        self.scan()
        await self.join_peers()

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
        shared_records.RETRY_INTERVAL_S)."""
        return await self.tell(writes)

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

    def whole_state(self) -> list[FileWrite]:
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

    def _apply(self, write: FileWrite) -> bool:
        if not self.accepts(write.name):
            log.warning("%s: %r from another node is not a shared file here; skipped", self.directory, write.name)
            return False
        local = self._scan_one(write.name)  # a change made here and not yet looked at is a write too
        if local is not None:
            self.spawn(self.publish([local]))
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

    async def answer(self, group: str) -> None:
        # A change made here and not yet looked at goes to every group, not only to the one that asked.
        local = self.scan()
        if local:
            self.spawn(self.publish(local))
        await super().answer(group)

    # --- SharedRecords ---

    def encode(self, writes: Iterable[FileWrite]) -> Iterator[bytes]:
        return encode_writes(writes)

    def decode(self, body: bytes) -> list[FileWrite]:
        return decode_writes(body)

    def key_of(self, write: FileWrite) -> str:
        return write.name

    def receive(self, writes: list[FileWrite], group: str) -> None:
        applied = [write for write in writes if self._apply(write)]
        if not applied:
            return
        self._save()
        log.info("%s: %s from broker group %s", self.directory,
                 ", ".join(f"{w.name} {'deleted' if w.content is None else 'written'}" for w in applied),
                 group)  # fmt: skip
        self.changed()

    def _save(self) -> None:
        replace_file(self.state_file,
                     json.dumps({"files": {name: known.to_json() for name, known in self._known.items()}}))  # fmt: skip

    def known(self) -> dict[str, Known]:
        return dict(self._known)
