"""The light queues of other broker groups as the gateway reads them: what a session of this node reads of a filter's
queue on another group comes through `pull`, from the messages kept decoded here while it has them, else from the
group. While a connected session reads a filter, a long poll per (group, queue) takes what arrives there at once,
keeps it, and wakes the sessions reading that filter (`arrived`), as the store's arrival listener does for this
group's own queues."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable

from core import CoreError, PullStatus, StoredMessage
from mqtt_bridge.message_cache import Pulled, read_runs
from mqtt_bridge.message_mapping import MqttMessage
from mqtt_bridge.wire.protocol_events import CachedMessage
from peers.group_peers import ClusterPeers

log = logging.getLogger("mqtt_bridge.cluster")

# Entries kept per (group, queue): sessions behind by more read from the group.
KEPT_PER_QUEUE = 8192
# A long poll is held by the group this long at most (RocketMQ's brokerSuspendMaxTimeMillis is 15 s).
LONG_POLL_MS = 15_000
WATCH_BATCH = 256
# After a failed pull (the group restarting, an election), the next one waits this long.
RETRY_S = 1.0
# Watched queues are matched with the groups known this often (a group that joined gets its long polls).
RESYNC_S = 5.0
# What an entry costs besides its payload, as message_cache.py counts it.
_ENTRY_OVERHEAD = 700

Key = tuple[str, str]  # (broker group, light queue)


def cached_of(stored: StoredMessage) -> CachedMessage | None:
    message = MqttMessage.from_core(stored)
    if message is None:
        return None
    return CachedMessage(message, 2 * len(message.payload) + _ENTRY_OVERHEAD, stored.topic)


class RemoteQueues:
    def __init__(self, peers: ClusterPeers, arrived: Callable[[str], None]) -> None:
        self.peers = peers
        self._arrived = arrived
        # (group, queue) -> queue offset -> (commit-log offset in that group, message or None)
        self._entries: dict[Key, dict[int, tuple[int, CachedMessage | None]]] = {}
        self._watched: set[str] = set()
        self._watchers: dict[Key, asyncio.Task[None]] = {}
        # Where each long poll reads next: below it, everything the group held is kept or was read.
        self._tails: dict[Key, int] = {}
        self._resync: asyncio.Task[None] | None = None
        self.hits = 0
        self.misses = 0

    def start(self) -> None:
        self._resync = asyncio.get_running_loop().create_task(self._resync_periodically())

    async def close(self) -> None:
        tasks = [task for task in (self._resync, *self._watchers.values()) if task is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._watchers.clear()

    # --- reading ---

    async def pull(self, group: str, queue: str, offset: int, max_count: int) -> Pulled:
        """Up to `max_count` messages of `queue` on `group` from `offset`, as MessageCache.pull answers."""
        kept = self._entries.get((group, queue))
        found: list[tuple[int, int, CachedMessage | None]] = []
        if kept:
            while len(found) < max_count:
                entry = kept.get(offset + len(found))
                if entry is None:
                    break
                found.append((entry[0], offset + len(found), entry[1]))
        if found:
            self.hits += len(found)
            return Pulled(PullStatus.FOUND, found, offset + len(found))
        tail = self._tails.get((group, queue))
        if tail is not None and offset >= tail:
            return Pulled(PullStatus.NO_NEW_MSG, found, offset)  # the long poll takes what comes next
        got = await self.peers.pull(group, queue, offset, max_count)
        for stored in got.messages:
            found.append((stored.commit_log_offset, stored.queue_offset, self._keep(group, queue, stored)))
        self.misses += len(found)
        return Pulled(got.status, found, got.next_begin_offset)

    def high(self, group: str, queue: str) -> int | None:
        """Where the long poll of `queue` on `group` reads next (everything below it was read), None before its
        first answer."""
        return self._tails.get((group, queue))

    async def read(self, group: str, queue: str, offsets: list[int]) -> dict[int, CachedMessage | None]:
        """The messages at `offsets` (ascending) of `queue` on `group`, as MessageCache.read answers."""
        return await read_runs(lambda offset, count: self.pull(group, queue, offset, count), offsets)

    def _keep(self, group: str, queue: str, stored: StoredMessage) -> CachedMessage | None:
        kept = self._entries.setdefault((group, queue), {})
        cached = cached_of(stored)
        kept[stored.queue_offset] = (stored.commit_log_offset, cached)
        while len(kept) > KEPT_PER_QUEUE:
            del kept[next(iter(kept))]  # the first kept: the oldest but for a rare re-read
        return cached

    # --- long polls ---

    def watch(self, queue: str) -> None:
        """Connected sessions of this node read `queue`: poll it on every other group."""
        self._watched.add(queue)
        for group in self.peers.other_groups():
            self._start_watcher(group, queue)

    def unwatch(self, queue: str) -> None:
        self._watched.discard(queue)
        for key in [key for key in self._watchers if key[1] == queue]:
            self._watchers.pop(key).cancel()
            self._tails.pop(key, None)
        for key in [key for key in self._entries if key[1] == queue]:
            del self._entries[key]

    def _start_watcher(self, group: str, queue: str) -> None:
        key = (group, queue)
        if key not in self._watchers:
            self._watchers[key] = asyncio.get_running_loop().create_task(self._watch(group, queue))

    async def _watch(self, group: str, queue: str) -> None:
        tail: int | None = None
        while True:
            try:
                if tail is None:
                    tail = await self.peers.max_offset(group, queue)
                got = await self.peers.pull(group, queue, tail, WATCH_BATCH, LONG_POLL_MS)
            except (CoreError, OSError) as exc:
                log.debug("long poll of %s on broker group %s: %s; again in %.0f s", queue, group, exc, RETRY_S)
                await asyncio.sleep(RETRY_S)
                await self.peers.refresh()  # the group may have a new master (failover, a restart elsewhere)
                continue
            if got.status is PullStatus.FOUND and got.messages:
                for stored in got.messages:
                    self._keep(group, queue, stored)
                self._arrived(queue)
            if got.next_begin_offset > tail or got.status is PullStatus.OFFSET_ILLEGAL:
                tail = got.next_begin_offset
            elif got.status is not PullStatus.NO_NEW_MSG:
                await asyncio.sleep(RETRY_S)  # nothing to read and no long poll held: do not spin
            self._tails[(group, queue)] = tail

    async def _resync_periodically(self) -> None:
        while True:
            await asyncio.sleep(RESYNC_S)
            groups = set(self.peers.other_groups())
            for queue in self._watched:
                for group in groups:
                    self._start_watcher(group, queue)
            for key in [key for key in self._watchers if key[0] not in groups]:
                self._watchers.pop(key).cancel()
                self._tails.pop(key, None)
