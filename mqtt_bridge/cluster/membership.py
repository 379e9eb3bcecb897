"""This broker group's part in the cluster's MQTT gateway: the filter registry (every group's filters, for the send
hook), the filters this group announces to the others (one change record at a time, in order, changes made
meanwhile sent together), the others' records applied as this group's store receives them, and what sessions here
read of the other groups (remote_queues.py). Alone (no NameServer of a cluster), only the registry: this group's
filters."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from core import Message
from mqtt_bridge.cluster.filter_records import (
    FILTERS_TOPIC,
    Claim,
    Delta,
    GroupSet,
    Hello,
    Uses,
    claim_message,
    decode_change,
    delta_message,
    hello_message,
    set_message,
)
from mqtt_bridge.cluster.filter_registry import FilterRegistry
from mqtt_bridge.cluster.remote_queues import RemoteQueues
from mqtt_bridge.cluster.share_partitions import dispatched_by, partition_queue
from mqtt_bridge.message_mapping import PROPERTY_PACKET_ID
from mqtt_bridge.sessions.session import Session, Subscription, remote_key, session_group
from peers.group_peers import ClusterPeers
from peers.live_groups import LiveGroups

log = logging.getLogger("mqtt_bridge.cluster")

# A retained message's copy on the other groups: marked so (its value, the group that stored the message).
PROPERTY_RETAINED_COPY = "MQTT_RETAINED_COPY"
# Not copied: where the original went, and its QoS 2 packet id (the copy is no inbound publish).
RETAINED_COPY_DROPS = frozenset({"INNER_MULTI_DISPATCH", "UNIQ_KEY", PROPERTY_PACKET_ID})

# How long a starting node waits for the other groups' filter sets before it serves MQTT clients.
JOIN_TIMEOUT_S = 5.0


class Membership:
    def __init__(self, group: str, peers: ClusterPeers | None = None, snapshot: Path | None = None) -> None:
        self.group = group
        self.registry = FilterRegistry()
        self.peers = peers
        self.remote: RemoteQueues | None = None
        self.live: LiveGroups | None = None
        self._snapshot = snapshot
        self._pending_uses: Uses = {}
        self._pending_releases: dict[str, None] = {}
        self._pending_sets: set[str] = set()  # groups that asked for this one's set
        self._waiters: list[asyncio.Future[bool]] = []
        self._sender: asyncio.Task[None] | None = None
        self._sets_heard: set[str] = set()
        self._heard = asyncio.Event()
        # A client connected to another group's node, which took its session over (the gateway lets it go).
        self.claimed: Callable[[str], None] = lambda client_id: None

    @property
    def clustered(self) -> bool:
        return self.peers is not None

    def other_groups(self) -> list[str]:
        return self.peers.other_groups() if self.peers is not None else []

    def announced(self, queue: str) -> bool:
        return self.registry.used_by(self.group, queue)

    # --- life cycle ---

    def load(self) -> None:
        """The other groups' filters as this node last knew them (a group that is down still has sessions)."""
        if self._snapshot is None or not self._snapshot.exists():
            return
        try:
            self.registry.load_json(json.loads(self._snapshot.read_text()))
        except (OSError, ValueError) as exc:
            log.error("%s: not read (%s); the other groups' filters come with their sets", self._snapshot, exc)
        self.registry.replace_group(self.group, {})  # this group's own come from its sessions

    def save(self) -> None:
        if self._snapshot is None:
            return
        self._snapshot.parent.mkdir(parents=True, exist_ok=True)
        temporary = self._snapshot.with_suffix(".tmp")
        temporary.write_text(json.dumps(self.registry.to_json()))
        temporary.replace(self._snapshot)

    async def join(self, remote: RemoteQueues) -> None:
        """On a cluster: tell the other groups what this one uses, ask for theirs, and wait for them (at most
        JOIN_TIMEOUT_S: a group that does not answer is down, and its filters are those of the snapshot)."""
        assert self.peers is not None
        self.remote = remote
        others = self.other_groups()
        self._pending_sets.update(others)
        self._kick()
        failed = await self.peers.broadcast(hello_message(self.group), others)
        waiting = set(others) - set(failed)
        deadline = time.monotonic() + JOIN_TIMEOUT_S
        while waiting - self._sets_heard and time.monotonic() < deadline:
            self._heard.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._heard.wait(), deadline - time.monotonic())
        missing = sorted(waiting - self._sets_heard) + sorted(failed)
        if missing:
            log.warning("MQTT: no filter set from broker group(s) %s; their filters are those last known",
                        ", ".join(missing))  # fmt: skip
        log.info("MQTT on a cluster: broker group %s with %s; %d filters in use", self.group,
                 ", ".join(others) or "no other group yet", len(self.registry))  # fmt: skip
        # Shared subscriptions' messages go to the live nodes' partitions: a dead node's are taken over.
        self.live = LiveGroups(self.peers, "MQTT")
        self.live.changed = self._live_changed
        await self.live.start()
        self._live_changed()

    def _live_changed(self) -> None:
        if self.live is not None:
            self.registry.set_live(frozenset(self.live.live))

    async def close(self) -> None:
        if self.live is not None:
            await self.live.close()
        if self._sender is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(self._sender), 5)
        if self.remote is not None:
            await self.remote.close()
        self.save()

    # --- this group's filters ---

    async def announce(self, subs: Iterable[Subscription]) -> bool:
        """Tell every other group that this one uses the subscriptions' queues; False if a group could not be told
        (the subscriptions are then refused)."""
        subs = list(subs)
        if self.peers is None or not subs:
            return True
        for sub in subs:
            self._pending_releases.pop(sub.queue, None)
            self._pending_uses[sub.queue] = (sub.topic_filter, sub.share_group)
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._waiters.append(done)
        self._kick()
        return await done

    def release(self, queue: str) -> None:
        """This group no longer uses `queue` (its last session here let it go)."""
        self.registry.remove(self.group, queue)
        if self.peers is not None:
            self._pending_uses.pop(queue, None)
            self._pending_releases[queue] = None
            self._kick()

    def _kick(self) -> None:
        if self._sender is None or self._sender.done():
            self._sender = asyncio.get_running_loop().create_task(self._send_pending())

    async def _send_pending(self) -> None:
        assert self.peers is not None
        while self._pending_uses or self._pending_releases or self._pending_sets:
            if self._pending_uses or self._pending_releases:
                uses, self._pending_uses = self._pending_uses, {}
                releases, self._pending_releases = list(self._pending_releases), {}
                waiters, self._waiters = self._waiters, []
                failed = await self.peers.broadcast(delta_message(self.group, uses, releases))
                for waiter in waiters:
                    if not waiter.done():
                        waiter.set_result(not failed)
                continue
            targets, self._pending_sets = sorted(self._pending_sets), set()
            # The set as it is now: changes made meanwhile follow as deltas, which it may already hold.
            await self.peers.broadcast(set_message(self.group, self._own_uses()), targets)

    def _own_uses(self) -> Uses:
        return {queue: (use.topic_filter, use.share_group) for queue, use in self.registry.of_group(self.group).items()}

    async def claim(self, client_id: str) -> bool:
        """A client connected here: every other group's node lets its session go (closing its connection) before
        this one is answered; False if a group with a master could not be told."""
        if self.peers is None:
            return True
        return not await self.peers.broadcast(claim_message(self.group, client_id))

    async def copy_retained(self, message: Message) -> None:
        """A retained message stored here, copied to the other groups' retained messages (a record of topic
        MQTT_FILTERS marked MQTT_RETAINED_COPY: their send hooks give it to no subscriber's queue)."""
        if self.peers is None:
            return
        properties = {
            name: value for name, value in message.properties.items() if name not in RETAINED_COPY_DROPS
        }  # fmt: skip
        properties[PROPERTY_RETAINED_COPY] = self.group
        await self.peers.broadcast(Message(FILTERS_TOPIC, bytes(message.body), properties=properties))

    async def copy(self, message: Message) -> None:
        """A session record written here, written to the other groups too (their nodes know where each session
        is, and take it over from this record when its client connects there)."""
        if self.peers is not None:
            await self.peers.broadcast(message)

    # --- the other groups' records ---

    def record_stored(self, message: Message) -> None:
        """A MQTT_FILTERS record reached this group's store (from the stored listener, before its sender's
        SEND_OK)."""
        try:
            change = decode_change(message)
        except ValueError as exc:
            log.error("an MQTT filter record could not be read (%s): skipped", exc)
            return
        if change is None or change.group == self.group:
            return  # this group's own filters are its sessions'
        if self.peers is not None:
            self.peers.heard(change.group)
        match change:
            case Delta(group, uses, releases):
                for queue in releases:
                    self.registry.remove(group, queue)
                for queue, (topic_filter, share) in uses.items():
                    self.registry.add(group, queue, topic_filter, share)
            case GroupSet(group, uses):
                self.registry.replace_group(group, uses)
                self._sets_heard.add(group)
                self._heard.set()
            case Hello(group):
                if self.peers is not None:
                    self._pending_sets.add(group)
                    self._kick()
            case Claim(group, client_id):
                self.claimed(client_id)

    # --- what sessions here read of the other groups ---

    def reading(self, queue: str) -> None:
        """A connected session here reads `queue`: its arrivals on the other groups are polled."""
        if self.remote is not None and queue in self.registry.uses:
            self.remote.watch(queue)

    def shared_partitions(self, queue: str) -> list[tuple[str, str | None]]:
        """The partitions of shared queue `queue` this node hands out to its members (share_partitions.py): its
        own, and those of nodes without members that fall to it, each on every group known, as (partition queue,
        broker group or None for this one)."""
        users = self.registry.live_users(queue)
        if self.peers is None or not users:
            return []
        groups = [self.group, *self.other_groups()]
        return [
            (partition_queue(queue, node), None if where == self.group else where)
            for node in dispatched_by(self.group, users, groups)
            for where in groups
        ]

    def watch(self, queue: str) -> None:
        """Poll `queue` on every other group (a shared subscription's partition handed out here)."""
        if self.remote is not None:
            self.remote.watch(queue)

    def not_reading(self, queue: str) -> None:
        if self.remote is not None:
            self.remote.unwatch(queue)

    async def starts(self, queues: list[str], session: Session) -> dict[str, int]:
        """Where new subscriptions start on the other groups: the end of each queue there now (a group that does
        not answer: where the delivery loop finds it)."""
        if self.peers is None or not queues:
            return {}
        peers = self.peers

        async def end(group: str, queue: str) -> tuple[str, int | None]:
            try:
                return remote_key(queue, group), await peers.max_offset(group, queue)
            except Exception as exc:  # any failure: the loop asks again
                log.debug("end of %s on %s not known: %s", queue, group, exc)
                return remote_key(queue, group), None

        ends = await asyncio.gather(*(end(group, queue) for group in self.other_groups() for queue in queues))
        return {key: offset for key, offset in ends if offset is not None and key not in session.read_offsets}

    async def restore_positions(self, session: Session) -> None:
        """A persistent session's positions on the other groups: its consumer offsets there, or its record's where
        those are behind (written every second)."""
        if self.peers is None:
            return
        group_name = session_group(session.client_id, session.generation)
        for queue in session.own_queues():
            for group in self.other_groups():
                key = remote_key(queue, group)
                with contextlib.suppress(Exception):
                    committed = await self.peers.committed(group, group_name, queue)
                    if committed > session.read_offsets.get(key, -1):
                        session.read_offsets[key] = committed

    def commit(self, group: str, consumer_group: str, queue: str, offset: int) -> None:
        if self.peers is not None:
            self.peers.commit(group, consumer_group, queue, offset)


__all__ = ["FILTERS_TOPIC", "Membership"]
