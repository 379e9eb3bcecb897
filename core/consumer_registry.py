"""Live members of consumer groups (RocketMQ's ConsumerManager): heartbeats in, member lists out.

A member registers with its client id, message model and subscriptions, and heartbeats every
`heartbeat_interval` (RocketMQ: 30 s). A member silent for `expire_after_s` (RocketMQ's channel expiry: 120 s)
is dropped, and every member of the group is told its group changed (RocketMQ's NOTIFY_CONSUMER_IDS_CHANGED), so
it rebalances now instead of at its next periodic rebalance.

Readers inside the process that read a group with pull (connector sink tasks, EventBridge targets,
MQTT sessions) and the gRPC endpoint's pop clients `join` instead: they cannot go silent without the process
knowing, so they do not heartbeat and never expire; they `unregister` when they stop reading. Each member says how
it consumes (ConsumeType, RocketMQ's consumeType), which decides whether an offset reset would be undone by it.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

DEFAULT_EXPIRE_AFTER_S = 120.0

# Called with the group name when its member list changes.
GroupListener = Callable[[str], None]


class ConsumeType(enum.Enum):
    """How a member consumes (RocketMQ's ConsumeType). PUSH and PULL members hold their positions in memory and
    commit them, so a reset of the group's offsets would be undone by them; POP members (the broker keeps their
    positions) follow a reset at their next pop."""

    PUSH = "PUSH"  # CONSUME_PASSIVELY: an in-process push consumer, heartbeating
    PULL = "PULL"  # CONSUME_ACTIVELY: a reader in the process that pulls from its own positions
    POP = "POP"  # CONSUME_POP: a pop client of the gRPC endpoint

    @property
    def holds_positions(self) -> bool:
        return self is not ConsumeType.POP


@dataclass(slots=True, frozen=True)
class Subscription:
    topic: str
    expression_type: str = "TAG"
    expression: str = "*"


@dataclass(slots=True)
class Member:
    client_id: str
    message_model: str
    subscriptions: Mapping[str, Subscription]
    last_heartbeat: float  # for a member that joined (does not heartbeat): when it joined
    on_change: GroupListener | None = field(default=None, repr=False)
    consume_type: ConsumeType = ConsumeType.PUSH
    heartbeats: bool = True  # False: joined by a reader of this process; never expires, leaves by unregister


class ConsumerRegistry:
    def __init__(self, expire_after_s: float = DEFAULT_EXPIRE_AFTER_S, clock: Callable[[], float] = time.monotonic):
        self.expire_after_s = expire_after_s
        self.clock = clock
        self._groups: dict[str, dict[str, Member]] = {}

    def heartbeat(
        self,
        group: str,
        client_id: str,
        message_model: str,
        subscriptions: Mapping[str, Subscription],
        on_change: GroupListener | None = None,
    ) -> None:
        """Register or refresh a member; the group is told if the member is new."""
        members = self._groups.setdefault(group, {})
        known = members.get(client_id)
        members[client_id] = Member(client_id, message_model, dict(subscriptions), self.clock(), on_change)
        if known is None:
            log.info("consumer group %s: %s joined", group, client_id)
            self._notify(group)

    def join(
        self,
        group: str,
        client_id: str,
        topics: Iterable[str] = (),
        consume_type: ConsumeType = ConsumeType.PULL,
        message_model: str = "CLUSTERING",
    ) -> None:
        """A reader of this process (or a pop client of the gRPC endpoint) starts reading `group`: a member that does
        not heartbeat, until `unregister`. Joining again replaces its topics; the group is told if it is new."""
        members = self._groups.setdefault(group, {})
        known = members.get(client_id)
        subscriptions = {topic: Subscription(topic) for topic in topics}
        members[client_id] = Member(
            client_id, message_model, subscriptions, self.clock(), None, consume_type, heartbeats=False
        )
        if known is None:
            log.info("consumer group %s: %s joined (%s)", group, client_id, consume_type.value)
            self._notify(group)

    def unregister(self, group: str, client_id: str) -> None:
        members = self._groups.get(group, {})
        if members.pop(client_id, None) is not None:
            log.info("consumer group %s: %s left", group, client_id)
            if not members:
                self._groups.pop(group, None)
            self._notify(group)

    def expire(self) -> list[tuple[str, str]]:
        """Drop members whose last heartbeat is older than expire_after_s; return (group, client id) dropped."""
        now = self.clock()
        dropped = []
        for group, members in list(self._groups.items()):
            for client_id, member in list(members.items()):
                if member.heartbeats and now - member.last_heartbeat > self.expire_after_s:
                    del members[client_id]
                    dropped.append((group, client_id))
                    log.warning("consumer group %s: %s stopped heartbeating; dropped", group, client_id)
            if not members:
                del self._groups[group]
        for group in {group for group, _ in dropped}:
            self._notify(group)
        return dropped

    def client_ids(self, group: str) -> list[str]:
        return sorted(self._groups.get(group, {}))

    def members(self, group: str) -> list[Member]:
        return [member for _, member in sorted(self._groups.get(group, {}).items())]

    def groups(self) -> list[str]:
        return sorted(self._groups)

    def _notify(self, group: str) -> None:
        for member in list(self._groups.get(group, {}).values()):
            if member.on_change is not None:
                try:
                    member.on_change(group)
                except Exception:
                    log.exception("group-change listener of %s failed", member.client_id)
