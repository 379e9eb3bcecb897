"""The other broker groups of the cluster, as one door of a node sees them through the remote client (one Cluster per
door): the door's records written to queue 0 of its records topic on every group, the groups alive now (those with
a master in the records topic's route), and the light queues of other groups read, measured and their positions
committed there (positions in a group's light queues are consumer offsets on that group, as a RocketMQ consumer's
are)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence

from core import CoreError, Message, MessageQueue, PullResult
from remote_client import Cluster, Producer, PullConsumer
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand

log = logging.getLogger(__name__)

# How long a record may take to reach a group: long enough for an election under automatic failover (about 5 s),
# after which the change that needs it is refused (an MQTT SUBSCRIBE, an EventBridge rule written through the API).
BROADCAST_TIMEOUT_MS = 12_000
# After a failed write, the next one (with the routes asked again) waits this long.
RETRY_S = 0.5
# A group gone from the NameServers' routes (its master's connection closed) is waited for this long, for the master
# elected after it (automatic failover: the lease, 5 s, and the election); then it is passed over until it is back,
# so that a node that died without a successor holds up no record (an MQTT CONNECT, a rule written) after that.
ELECTION_GRACE_S = 8.0
# Positions committed on other groups are written this often (and when a session's connection goes).
COMMIT_INTERVAL_S = 1.0


class ClusterPeers:
    def __init__(self, namesrv_addresses: Sequence[str], own_group: str, topic: str, door: str) -> None:
        """`topic`: the door's records topic (one queue on every group whose node runs the door); `door` names its
        client instance, producer group (`<door>_<group>`) and reader group (`<door>_READER`, which commits
        nothing)."""
        self.own_group = own_group
        self.topic = topic
        self.cluster = Cluster(list(namesrv_addresses), instance_name=f"{door.lower()}-{own_group}")
        self.producer = Producer(self.cluster, f"{door}_{own_group}", send_msg_timeout_ms=BROADCAST_TIMEOUT_MS)
        self.reader = PullConsumer(self.cluster, f"{door}_READER")
        self._commits: dict[tuple[str, str, str], int] = {}  # (group, consumer group, queue) -> offset
        self._committing: asyncio.Task[None] | None = None
        self._groups: list[str] = []  # every group known: grows only (a group down is still read when it is back)
        self._others: list[str] = []  # the same without this one
        self._route_seen: object = None
        self._absent_since: dict[str, float] = {}  # groups known and missing from the last route asked, since when

    async def start(self) -> None:
        await self.cluster.start()
        await self.producer.start()
        await self.refresh()
        self._committing = asyncio.get_running_loop().create_task(self._commit_periodically())

    async def close(self) -> None:
        if self._committing is not None:
            self._committing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._committing
        with contextlib.suppress(Exception):
            await self.flush_commits()
        await self.producer.shutdown()
        await self.cluster.close()

    # --- the groups ---

    async def refresh(self) -> list[str]:
        """The broker groups that hold the records topic (every group whose node runs the door), asked again."""
        with contextlib.suppress(CoreError):
            route = await self.cluster.route(self.topic, refresh=True)
            self._seen({queue.broker_name for queue in route.read_queues()})
        return self._groups

    def other_groups(self) -> list[str]:
        """The other groups as last known: the route (asked again every 30 s, and when a group is not in it) and
        the groups heard from (`heard`)."""
        route = self.cluster.cached_route(self.topic)
        if route is not None and route is not self._route_seen:
            # Read once per route asked (every 30 s), not at each call: MQTT delivery asks at every round.
            self._route_seen = route
            self._learn({queue.broker_name for queue in route.read_queues()})
        return self._others

    async def live_groups(self) -> list[str]:
        """The groups with a master in the records topic's route, asked again, this one always among them: a group
        whose master died leaves the route when its connection to the NameServers closes (at once for a killed
        process), and comes back with the master elected after it. Raises CoreError when no NameServer answers
        (what was known stays the best guess)."""
        route = await self.cluster.route(self.topic, refresh=True)
        live = {queue.broker_name for queue in route.read_queues()} | {self.own_group}
        self._seen(live)
        return sorted(live)

    def heard(self, group: str) -> None:
        """A group's node wrote to this one (it started): it is one of the others from now on."""
        self._learn({group})

    async def other_live_groups(self) -> list[str]:
        """The other live groups; when no NameServer answers, the others known and not gone (the best guess)."""
        try:
            live = await self.live_groups()
        except CoreError:
            return [group for group in self.other_groups() if not self.gone(group)]
        return [group for group in live if group != self.own_group]

    def _seen(self, in_route: set[str]) -> None:
        """The groups the NameServers route to now: known from now on; the others known are absent."""
        self._learn(in_route)
        now = time.monotonic()
        for group in self._others:
            if group in in_route:
                self._absent_since.pop(group, None)
            else:
                self._absent_since.setdefault(group, now)

    def gone(self, group: str) -> bool:
        """Missing from the routes for ELECTION_GRACE_S or more: down, with no master elected after it."""
        since = self._absent_since.get(group)
        return since is not None and time.monotonic() - since >= ELECTION_GRACE_S

    def _learn(self, groups: set[str]) -> None:
        if not groups <= set(self._groups):
            self._groups = sorted(set(self._groups) | groups)
            self._others = [group for group in self._groups if group != self.own_group]

    # --- the door's records ---

    async def broadcast(self, message: Message, groups: Sequence[str] | None = None) -> list[str]:
        """Write `message` (of the records topic) to queue 0 of each of `groups` (default: the other groups); the
        groups with a master that it could not be written to, each logged (a group without one is passed over)."""
        targets = list(self.other_groups() if groups is None else groups)
        if not targets:
            return []

        deadline = time.monotonic() + BROADCAST_TIMEOUT_MS / 1000

        async def send(group: str) -> str | None:
            copy = self.producer.message(message.topic, bytes(message.body), properties=dict(message.properties))
            while True:
                if self.gone(group):
                    # Down with no successor: its node hears from every group when it starts (its hello).
                    log.debug("record (%s) not written to broker group %s: it is down", message.topic, group)
                    return None
                try:
                    self.cluster.master_address(group)
                except CoreError:
                    await self.refresh()  # a group that started since the route was asked, or elected a master
                    try:
                        self.cluster.master_address(group)
                    except CoreError:
                        # No master registered: the group stores nothing now, and its node hears from every
                        # group when it starts (its hello) before its door opens.
                        log.info("record (%s) not written to broker group %s: it has no master",
                                 message.topic, group)  # fmt: skip
                        return None
                try:
                    await self.producer.send_message(copy, MessageQueue(message.topic, group, 0))
                    return None
                except CoreError as exc:
                    if time.monotonic() >= deadline:
                        log.warning("record (%s) not written to broker group %s: %s", message.topic, group, exc)
                        return group
                    # Its master may have just died: the NameServers name the one elected after it (automatic
                    # failover), or none once the dead one's connection is gone.
                    log.info("record (%s) not written to broker group %s yet: %s", message.topic, group, exc)
                    await asyncio.sleep(RETRY_S)
                    await self.refresh()

        failed = await asyncio.gather(*(send(group) for group in targets))
        return [group for group in failed if group is not None]

    # --- other groups' light queues ---

    async def pull(self, group: str, queue: str, offset: int, max_count: int, long_poll_ms: int = 0) -> PullResult:
        return await self.reader.pull(MessageQueue(queue, group, 0), offset, max_count, long_poll_ms=long_poll_ms)

    async def max_offset(self, group: str, queue: str) -> int:
        fields = {"topic": queue, "queueId": "0"}
        reply = await self.cluster.call_any(group, RemotingCommand(RequestCode.GET_MAX_OFFSET, ext_fields=fields))
        return int(reply.ext_fields["offset"])

    async def committed(self, group: str, consumer_group: str, queue: str) -> int:
        """A consumer group's committed offset in a light queue of `group`, -1 when it has none."""
        pending = self._commits.get((group, consumer_group, queue))
        if pending is not None:
            return pending
        fields = {"consumerGroup": consumer_group, "topic": queue, "queueId": "0", "setZeroIfNotFound": "false"}
        request = RemotingCommand(RequestCode.QUERY_CONSUMER_OFFSET, ext_fields=fields)
        reply = await self.cluster.invoke_offsets(group, request)
        if reply.code != ResponseCode.SUCCESS:
            return -1  # QUERY_NOT_FOUND; a refusal reads as none, and the session starts at the queue's end
        return int(reply.ext_fields.get("offset", "-1"))

    def commit(self, group: str, consumer_group: str, queue: str, offset: int) -> None:
        """Commit in the background (within COMMIT_INTERVAL_S, or at `flush_commits`)."""
        self._commits[(group, consumer_group, queue)] = offset

    async def flush_commits(self) -> None:
        commits, self._commits = self._commits, {}
        for (group, consumer_group, queue), offset in commits.items():
            fields = {"consumerGroup": consumer_group, "topic": queue, "queueId": "0", "commitOffset": str(offset)}
            try:
                await self.cluster.call_any(
                    group, RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=fields)
                )
            except CoreError as exc:
                log.warning("offset %d of %s in %s on broker group %s not written: %s",
                            offset, consumer_group, queue, group, exc)  # fmt: skip
                self._commits.setdefault((group, consumer_group, queue), offset)

    async def _commit_periodically(self) -> None:
        while True:
            await asyncio.sleep(COMMIT_INTERVAL_S)
            with contextlib.suppress(Exception):
                await self.flush_commits()
