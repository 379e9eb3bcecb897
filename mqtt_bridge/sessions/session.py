"""An MQTT session: what outlives one connection (subscriptions, messages in flight, read positions), as plain
state with the rules for what to send next. No I/O: the gateway feeds it messages read from the core and
acknowledgements from the connection.

Where messages wait: every subscription filter has a light queue in the core (`light_queue_name`), shared by
all sessions subscribed to that filter; a message published once gets one consume-queue entry per matching
filter. A session reads each of its filters' queues from its own position, merges them in commit-log order
(so a message matching two of its filters is sent once, at the highest granted QoS), and commits, per queue,
the lowest position still unacknowledged. A persistent session's positions are core consumer offsets, so what
it has not acknowledged survives a disconnect and a broker restart.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import mqtt5

from core import LIGHT_QUEUE_PREFIX
from mqtt_bridge.message_mapping import MqttMessage

# Session Expiry Interval meaning "never" (MQTT 5), and what a 3.1.1 clean-session-false session gets.
NEVER_EXPIRES = 0xFFFFFFFF

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def light_queue_name(topic_filter: str, share_group: str | None = None) -> str:
    """The light queue of a subscription filter: readable prefix, and a hash that tells filters apart.

    Core queue names allow letters, digits, '_', '-' and '%' (and at most 127 characters); MQTT filters allow
    almost anything, so the name keeps a sanitized head of the filter and 16 hex digits of its BLAKE2b hash.
    """
    key = topic_filter if share_group is None else f"$share/{share_group}/{topic_filter}"
    digest = hashlib.blake2b(key.encode(), digest_size=8).hexdigest()
    head = _UNSAFE.sub("_", key.replace("+", "P").replace("#", "H"))[:40]
    return f"{LIGHT_QUEUE_PREFIX}{'S' if share_group else 'F'}%{head}%{digest}"


# A position in another broker group's light queue is kept under "QUEUE@GROUP" (a light queue name has no '@'); one
# in this group's under the queue's name.
GROUP_SEPARATOR = "@"


def remote_key(queue: str, group: str) -> str:
    """The key of a session's position in `queue` on broker group `group` (another than the gateway's own)."""
    return f"{queue}{GROUP_SEPARATOR}{group}"


def split_key(key: str) -> tuple[str, str | None]:
    """(light queue, broker group or None for the gateway's own) of a position's key."""
    queue, _, group = key.partition(GROUP_SEPARATOR)
    return queue, group or None


def positions_from(positions: dict[str, int], writer: str, here: str) -> dict[str, int]:
    """A record's positions as the node of group `here` keys them: the record's keys are its writer's (a queue's
    name for the writer's own group)."""
    moved = {}
    for key, offset in positions.items():
        queue, group = split_key(key)
        group = group or writer
        moved[queue if group == here else remote_key(queue, group)] = offset
    return moved


def core_group_name(prefix: str, key: str) -> str:
    """A core consumer group name for `key`: readable head (sanitized, 40 characters) and a BLAKE2b hash."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).hexdigest()
    return f"{prefix}_{_UNSAFE.sub('_', key)[:40]}_{digest}"


def session_group(client_id: str, generation: str = "") -> str:
    """The core consumer group under which a session's read positions are committed. On a cluster each new session
    of a client id has a generation of its own (Session.generation), so that a session started clean on one node
    never reads the offsets an earlier session left on another group."""
    return core_group_name("MQTT_SESSION", f"{client_id}#{generation}" if generation else client_id)


@dataclass(slots=True)
class Subscription:
    topic_filter: str  # without the $share/group/ prefix
    qos: int
    share_group: str | None = None
    no_local: bool = False
    retain_as_published: bool = False
    retain_handling: int = 0
    subscription_id: int | None = None
    queue: str = ""

    def __post_init__(self) -> None:
        if not self.queue:
            self.queue = light_queue_name(self.topic_filter, self.share_group)

    @property
    def key(self) -> str:
        """How the client names it (and unsubscribes it)."""
        if self.share_group is None:
            return self.topic_filter
        return f"$share/{self.share_group}/{self.topic_filter}"

    def to_json(self) -> dict[str, object]:
        return {
            "filter": self.topic_filter,
            "qos": self.qos,
            "share": self.share_group,
            "no_local": self.no_local,
            "rap": self.retain_as_published,
            "rh": self.retain_handling,
            "id": self.subscription_id,
        }

    @classmethod
    def from_json(cls, data: dict[str, object]) -> Subscription:
        share = data.get("share")
        sub_id = data.get("id")
        return cls(
            str(data["filter"]),
            int(data["qos"]),  # type: ignore[call-overload]
            str(share) if share is not None else None,
            bool(data.get("no_local")),
            bool(data.get("rap")),
            int(data.get("rh", 0)),  # type: ignore[call-overload]
            int(sub_id) if isinstance(sub_id, int) else None,
        )

    @classmethod
    def from_packet(cls, option: mqtt5.TopicFilter, share_group: str | None, filter_only: str, sub_id: int | None):
        return cls(
            filter_only,
            int(option.max_qos),
            share_group,
            option.no_local,
            option.retain_as_published,
            int(option.retain_handling),
            sub_id,
        )


@dataclass(slots=True, init=False)
class Outgoing:
    """A publish sent with QoS 1/2 and not yet acknowledged, with the queue positions it stands for. One per QoS 1
    delivery, so its __init__ is written out: mypyc compiles a class's own methods, while those the dataclass
    decorator generates run interpreted."""

    message: MqttMessage
    qos: int
    retain: bool
    subscription_ids: list[int]
    positions: list[tuple[str, int]]  # (light queue, queue offset); empty for retained messages
    released: bool  # QoS 2: PUBREC came, PUBREL sent

    def __init__(
        self,
        message: MqttMessage,
        qos: int,
        retain: bool,
        subscription_ids: list[int],
        positions: list[tuple[str, int]],
        released: bool = False,
    ) -> None:
        self.message = message
        self.qos = qos
        self.retain = retain
        self.subscription_ids = subscription_ids
        self.positions = positions
        self.released = released


@dataclass(slots=True)
class Session:
    client_id: str
    expiry_interval: int = 0  # seconds after disconnect; 0: ends with the connection
    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    # Next queue offset to read, per light queue this session reads (remote_key: in another broker group's).
    read_offsets: dict[str, int] = field(default_factory=dict)
    # Queue offsets sent with QoS 1/2 and not acknowledged, per light queue.
    unacked: dict[str, set[int]] = field(default_factory=dict)
    inflight: dict[int, Outgoing] = field(default_factory=dict)
    # Inbound QoS 2 packet ids stored and PUBREC'd, waiting for the client's PUBREL.
    awaiting_release: set[int] = field(default_factory=set)
    will: mqtt5.Will | None = None
    connected: bool = False
    disconnected_at_ms: int | None = None
    # Deliveries given up because a queue ran past max_queued_messages.
    dropped: int = 0
    # On a cluster, what tells this session's consumer group from an earlier session's of the same client id.
    generation: str = ""

    @property
    def persistent(self) -> bool:
        return self.expiry_interval > 0

    def queues(self) -> set[str]:
        """The light queues of all its subscriptions, shared ones included."""
        return {sub.queue for sub in self.subscriptions.values()}

    def own_queues(self) -> set[str]:
        """The light queues it reads from its own positions (not the shared subscriptions')."""
        return {sub.queue for sub in self.subscriptions.values() if sub.share_group is None}

    def committed(self, queue: str) -> int:
        """The offset to commit for `queue`: nothing below it is unacknowledged."""
        pending = self.unacked.get(queue)
        if pending:
            return min(pending)
        return self.read_offsets[queue]

    def matching(self, positions: list[tuple[str, int]]) -> list[Subscription]:
        """This session's (non-shared) subscriptions a message came through, by the queues that hold it."""
        queues = {queue.partition(GROUP_SEPARATOR)[0] for queue, _ in positions}
        return [sub for sub in self.subscriptions.values() if sub.queue in queues and sub.share_group is None]

    def delivery(self, message: MqttMessage, subs: list[Subscription]) -> tuple[int, bool, list[int]] | None:
        """(QoS, retain flag, subscription ids) to send `message` with, or None if no subscription wants it.

        Overlapping subscriptions give one delivery at the highest granted QoS (MQTT 5 3.3.4: the server
        may send one copy; Mosquitto and EMQX do), capped by the QoS it was published with.
        """
        qos = -1
        retain = False
        ids: list[int] = []
        for sub in subs:
            if sub.no_local and message.client_id == self.client_id:
                continue
            qos = max(qos, min(sub.qos, message.qos))
            retain = retain or (sub.retain_as_published and message.retain)
            if sub.subscription_id is not None:
                ids.append(sub.subscription_id)
        if qos < 0:
            return None
        return qos, retain, ids

    def sent(self, packet_id: int, outgoing: Outgoing) -> None:
        self.inflight[packet_id] = outgoing
        for queue, offset in outgoing.positions:
            self.unacked.setdefault(queue, set()).add(offset)

    def acknowledged(self, packet_id: int) -> Outgoing | None:
        """PUBACK / PUBCOMP: forget the publish; returns it (None for an unknown id)."""
        outgoing = self.inflight.pop(packet_id, None)
        if outgoing is not None:
            for queue, offset in outgoing.positions:
                pending = self.unacked.get(queue)
                if pending is not None:
                    pending.discard(offset)
        return outgoing

    def advance(self, positions: list[tuple[str, int]]) -> None:
        """The message at these positions was handled (sent, or skipped): read on past it."""
        offsets = self.read_offsets
        for queue, offset in positions:
            if offsets.get(queue, 0) <= offset:
                offsets[queue] = offset + 1

    def to_json(
        self, subscriptions: dict[str, Subscription] | None = None, new_positions: dict[str, int] | None = None
    ) -> dict[str, object]:
        """The session record; `subscriptions` and `new_positions` (of queues it does not read yet): the record as
        it will be once a SUBSCRIBE is made, stored before it is made."""
        # The positions go with the record: consumer offsets are written every few seconds, and a session stored
        # at SUBSCRIBE must not start at the queue's end after a crash in between.
        own = self.own_queues()
        # This group's queues by name, another group's by remote_key (a record names the group that wrote it).
        positions = {key: self.committed(key) for key in self.read_offsets if split_key(key)[0] in own}
        for queue, offset in (new_positions or {}).items():
            positions.setdefault(queue, offset)
        subs = self.subscriptions if subscriptions is None else subscriptions
        record: dict[str, object] = {
            "expiry": self.expiry_interval,
            "subscriptions": [sub.to_json() for sub in subs.values()],
            "disconnected_at": self.disconnected_at_ms,
            "positions": positions,
        }
        if self.generation:
            record["generation"] = self.generation
        return record

    @classmethod
    def from_json(cls, client_id: str, data: dict[str, object]) -> Session:
        items = data.get("subscriptions", [])
        if not isinstance(items, list):
            raise ValueError("'subscriptions' must be a list")
        subs = [Subscription.from_json(item) for item in items]
        disconnected = data.get("disconnected_at")
        positions = data.get("positions") or {}
        if not isinstance(positions, dict):
            raise ValueError("'positions' must be an object")
        return cls(
            client_id,
            int(data["expiry"]),  # type: ignore[call-overload]
            {sub.key: sub for sub in subs},
            read_offsets={str(queue): int(offset) for queue, offset in positions.items()},
            disconnected_at_ms=int(disconnected) if isinstance(disconnected, int) else None,
            generation=str(data.get("generation") or ""),
        )
