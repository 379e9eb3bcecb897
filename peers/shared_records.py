"""What a shared directory (shared_directory.py) and a shared table (shared_table.py) have in common: state kept
the same on every node by records of a door's records topic, each applied by the receiving node as its store takes
it (the stored listener: before the writer's SEND_OK, the write is in the other node's state).

- A local write goes to every other live group (queue 0 of each); a group that could not be told is told again
  every RETRY_INTERVAL_S until it is.
- A starting node sends its whole state (hello) and waits, at most JOIN_TIMEOUT_S, for every other node's (state):
  it catches up with what changed while it was down, and the others with what it holds.

Records (PROPERTY_GROUP: the writer's group; the kind property, one per sort of state, says what the body holds;
any further properties a subclass names must match for a record to be its own):
    writes  writes made on the writer's node
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
from abc import ABC, abstractmethod
from collections.abc import Coroutine, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Generic, TypeVar

from core import Message
from peers.group_peers import ClusterPeers

log = logging.getLogger(__name__)

PROPERTY_GROUP = "PEER_GROUP"
WRITES, HELLO, STATE = "writes", "hello", "state"
# How long a starting node waits for the others' states before it goes on with what it has.
JOIN_TIMEOUT_S = 5.0
# A group that could not be told of a write is told again this often, until it is.
RETRY_INTERVAL_S = 5.0

W = TypeVar("W")


class SharedRecords(ABC, Generic[W]):
    """The records of one shared state; a subclass says how writes are encoded, keyed and applied."""

    def __init__(
        self,
        peers: ClusterPeers,
        kind_property: str,
        field: str,
        label: str,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        """`field`: the body's list of writes (versions.encode_batches), sent empty when there are none."""
        self.peers = peers
        self.field = field
        self.group = peers.own_group
        self.kind_property = kind_property
        self.label = label  # names the state in logs
        self.properties = dict(properties or {})
        self._pending: dict[str, dict[str, W]] = {}  # group -> key -> the write it has not been told of
        self._states_heard: set[str] = set()
        self._heard = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._retrying: asyncio.Task[None] | None = None

    # --- what a subclass says ---

    @abstractmethod
    def encode(self, writes: Iterable[W]) -> Iterator[bytes]: ...

    @abstractmethod
    def decode(self, body: bytes) -> list[W]: ...

    @abstractmethod
    def key_of(self, write: W) -> str: ...

    @abstractmethod
    def whole_state(self) -> list[W]: ...

    @abstractmethod
    def receive(self, writes: list[W], group: str) -> None:
        """Apply the writes another node made (its record was just stored here)."""

    # --- life cycle ---

    async def join_peers(self) -> None:
        """Tell the other nodes this one's whole state and take theirs (at most JOIN_TIMEOUT_S: a node that does not
        answer is down, and it hears this one's state when it starts)."""
        others = await self.peers.other_live_groups()
        failed = await self._send(HELLO, self.whole_state(), others)
        waiting = set(others) - set(failed)
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while waiting - self._states_heard and time.monotonic() < deadline:
            self._heard.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._heard.wait(), deadline - time.monotonic())
        missing = sorted(waiting - self._states_heard) + sorted(failed)
        if missing:
            log.warning("%s: no state from broker group(s) %s; they catch up when they start",
                        self.label, ", ".join(missing))  # fmt: skip
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

    async def tell(self, writes: list[W]) -> list[str]:
        """Tell every other live group of `writes`; the groups that could not be told (told again every
        RETRY_INTERVAL_S)."""
        if not writes:
            return []
        others = await self.peers.other_live_groups()
        failed = await self._send(WRITES, writes, others)
        for group in failed:
            self._pending.setdefault(group, {}).update((self.key_of(write), write) for write in writes)
        return failed

    # --- the other nodes' writes ---

    def record_stored(self, message: Message) -> None:
        """A record of the door's records topic reached this group's store (the stored listener, before its writer's
        SEND_OK)."""
        properties = message.properties
        kind, group = properties.get(self.kind_property), properties.get(PROPERTY_GROUP)
        if kind not in (WRITES, HELLO, STATE) or group is None or group == self.group:
            return
        if any(properties.get(name) != value for name, value in self.properties.items()):
            return
        try:
            writes = self.decode(bytes(message.body))
        except ValueError as exc:
            log.error("%s: a record from broker group %s could not be read (%s): skipped", self.label, group, exc)
            return
        self.peers.heard(group)
        self.receive(writes, group)
        if kind == HELLO:
            self.spawn(self.answer(group))
        elif kind == STATE:
            self._states_heard.add(group)
            self._heard.set()

    async def answer(self, group: str) -> None:
        """Answer a starting node's hello with this one's whole state."""
        await self._send(STATE, self.whole_state(), [group])

    # --- records ---

    async def _send(self, kind: str, writes: Iterable[W], groups: list[str]) -> list[str]:
        """Write `writes` as records of `kind` to `groups`; the groups that could not be told."""
        if not groups:
            return []
        bodies = list(self.encode(writes)) or [json.dumps({self.field: []}).encode()]
        failed: set[str] = set()
        for body in bodies:
            properties = {PROPERTY_GROUP: self.group, **self.properties, self.kind_property: kind}
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

    def spawn(self, coroutine: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def replace_file(path: Path, text: str) -> None:
    """Write `path` whole or not at all (a temporary beside it, renamed over it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text)
    os.replace(temporary, path)
