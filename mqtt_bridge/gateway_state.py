"""What the parts of the MQTT gateway share: its state (sessions and their rules, connections, light queues and
who reads them, shared groups, retained messages, durable records) and the small operations on it they all use.

The gateway is one object, written in modules by concern: gateway.py (life cycle, connecting, the session rules'
actions), inbound.py (publishing), subscriptions.py, delivery.py; each is a class on this base."""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import logging
import time
from collections.abc import Coroutine, Iterable
from pathlib import Path
from typing import Any

import mqtt5

from core import (
    Broker,
    CoreError,
    Message,
    StateTable,
)
from mqtt_bridge.acl_file import Access, AclFile
from mqtt_bridge.config import MqttConfig
from mqtt_bridge.link import Link
from mqtt_bridge.message_cache import MessageCache
from mqtt_bridge.message_mapping import (
    MqttMessage,
)
from mqtt_bridge.password_file import PasswordFile
from mqtt_bridge.protocol import MqttTraffic
from mqtt_bridge.session import Session, Subscription, session_group
from mqtt_bridge.session_rules import (
    SessionRules,
    Timer,
)
from mqtt_bridge.shared_group import SharedGroup
from mqtt_bridge.state_records import (
    INBOUND_QOS2_QUEUE,
    PROPERTY_SESSION,
    RETAINED_QUEUE,
    SESSIONS_TOPIC,
    qos2_change,
    qos2_value,
    retained_change,
    retained_json,
    retained_value,
    session_change,
    session_value,
)
from mqtt_bridge.sys_tree import SysTree
from mqtt_bridge.topic_trie import SubscriptionTrie, TopicTree

log = logging.getLogger("mqtt_bridge.gateway")

# Messages read from one light queue per round of a session's delivery loop.
READ_BATCH = 64
# Inbound QoS 0 PUBLISHes of one connection stored with one store call, at most: a run of a pipelining publisher
# (a read of 64 KiB holds about 800 small ones) is cut into batches of this many messages or payload bytes, well
# under the core's batch limit of 4 MiB (core.broker.MAX_BATCH_BYTES) whatever the packet size.
PUBLISH_BATCH = 256
PUBLISH_BATCH_BYTES = 1024 * 1024
Reason = mqtt5.ConnAckReasonCode


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def _version() -> str:
    try:
        return importlib.metadata.version("mqgate")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was not installed
        return "unknown"


_background: set[asyncio.Task[object]] = set()


class GatewayState:
    def __init__(self, broker: Broker, config: MqttConfig, state_dir: Path) -> None:
        self.broker = broker
        self.config = config
        self.state_dir = Path(state_dir)
        self.passwords = PasswordFile.load(config.password_file) if config.password_file else None
        self.acl = AclFile.load(config.acl_file) if config.acl_file else None
        # Filters by light queue: the hook names the queues whose filters match a topic.
        self.trie: SubscriptionTrie[str, None] = SubscriptionTrie()
        # Who uses each light queue (connected or persistent sessions): the queue goes when the last one does.
        self.queue_users: dict[str, set[str]] = {}
        # The sessions and the rules they follow (session_rules.py); what follows here is how they reach the core.
        self.rules = SessionRules(config.session_expiry_max_s)
        self.sessions = self.rules.sessions
        self.links: dict[str, Link] = {}
        self.readers: dict[str, set[str]] = {}  # light queue -> connected client ids reading it
        self.retained_topics = TopicTree()
        self.retained: StateTable[MqttMessage] = StateTable(
            broker, RETAINED_QUEUE, self.state_dir / "retained.json", retained_change, retained_json, retained_value
        )
        # Client ids whose session record was appended (or is being): their end appends a deletion.
        self._recorded: set[str] = set()
        self.stored_sessions: StateTable[dict[str, object]] = StateTable(
            broker, SESSIONS_TOPIC, self.state_dir / "sessions.json", session_change, lambda v: v, session_value
        )
        # Inbound QoS 2 publishes stored and not released, by `qos2_key`: a digest of topic and payload.
        self.inbound_qos2: StateTable[str] = StateTable(
            broker, INBOUND_QOS2_QUEUE, self.state_dir / "qos2.json", qos2_change, lambda v: v, qos2_value
        )
        # Shared subscriptions by light queue.
        self.shared: dict[str, SharedGroup] = {}
        self._timers: dict[tuple[Timer, str], asyncio.TimerHandle] = {}
        # Core topics by MQTT first level, once checked (and created).
        self._known_topics: dict[str, str] = {}
        # Recent messages decoded, by commit-log offset: what the gateway stores, its sessions read without the log.
        self.messages = MessageCache(broker, max_bytes=config.message_cache_mb * 1024 * 1024)
        self.connection_count = 0
        self.stats = {"published": 0, "delivered": 0, "dropped": 0, "refused": 0}
        # What every connection received and sent (the listener gives each MqttConnection this one), and PUBLISHes
        # refused by MQTT 5 reason code (publish_refusal.py; 0x95 and 0x93 for the packet too large and receive
        # maximum exceeded, which end the connection): read by the metrics and the $SYS tree.
        self.traffic = MqttTraffic()
        self.refusals: dict[int, int] = {}
        # The $SYS tree (sys_publishing.py): its current values by topic, in memory only.
        self.sys_tree = SysTree(_version(), time.monotonic())
        self.sys_messages: dict[str, MqttMessage] = {}
        self.sys_topics = TopicTree()
        self._sys_task: asyncio.Task[None] | None = None

    def allowed(self, link: Link, topic: str, access: Access) -> bool:
        if self.acl is None:
            return True
        return self.acl.check(username=link.username, client_id=link.client_id, topic=topic, access=access)

    def _commit_all(self) -> None:
        for session in self.sessions.values():
            if session.persistent:
                self._commit(session)
        for group in self.shared.values():
            self._commit_group(group)

    def _commit_group(self, group: SharedGroup) -> None:
        self.broker.commit_offset(group.consumer_group, group.queue, 0, group.committed())

    def _commit(self, session: Session, queues: Iterable[str] | None = None) -> None:
        """Commit the session's positions in `queues` (default: all it reads) as core consumer offsets."""
        group = session_group(session.client_id)
        for queue in session.own_queues() if queues is None else queues:
            if queue in session.read_offsets:
                self.broker.commit_offset(group, queue, 0, session.committed(queue))

    def _wake_members(self, group: SharedGroup) -> None:
        """Wake the connected members, a different one first each time: the first to run takes the new messages,
        so a trickle of single messages goes round the members instead of always to the same one."""
        links = [link for member in sorted(group.members) if (link := self.links.get(member)) is not None]
        if not links:
            return
        group.rotation = (group.rotation + 1) % len(links)
        for link in links[group.rotation :] + links[: group.rotation]:
            link.wake()

    def _session_data(
        self,
        session: Session,
        subscriptions: dict[str, Subscription] | None = None,
        new_positions: dict[str, int] | None = None,
    ) -> dict[str, object]:
        """The session record, with the positions of its shared subscriptions' groups as well: a group's consumer
        offset is written every few seconds, and a group must not start at the queue's end after a crash.
        `subscriptions`, `new_positions`: as Session.to_json."""
        data = session.to_json(subscriptions, new_positions)
        positions = data["positions"]
        assert isinstance(positions, dict)
        for sub in (session.subscriptions if subscriptions is None else subscriptions).values():
            group = self.shared.get(sub.queue) if sub.share_group is not None else None
            if group is not None:
                positions[sub.queue] = group.committed()
        return data

    def _store_session(self, session: Session) -> None:
        self._spawn(self._append_session_change(session.client_id, self._session_data(session)))

    async def _append_session_change(self, client_id: str, data: dict[str, object] | None) -> bool:
        """Append a session record (None: its deletion); the gateway's table of records follows once it is stored
        (GatewayState.session_stored, from the broker's stored listener). False, logged, if the core refused it."""
        body = json.dumps(data).encode() if data is not None else b""
        self._recorded.add(client_id)
        try:
            await self.broker.send(Message(topic=SESSIONS_TOPIC, body=body, properties={PROPERTY_SESSION: client_id}))
        except CoreError as exc:
            log.error("session %r: state not stored: %s", client_id, exc)
            return False
        return True

    async def store_session_now(self, session: Session, data: dict[str, object] | None = None) -> bool:
        """Store a persistent session's subscriptions before SUBACK/UNSUBACK (they must survive a crash); False if
        the core refused the record. `data`: the record to store, if not the session as it is."""
        record = data if data is not None else self._session_data(session)
        return await self._append_session_change(session.client_id, record)

    def session_stored(self, message: Message) -> None:
        """A session record reached the log: it is what a restart reads back."""
        client_id = message.properties.get(PROPERTY_SESSION)
        if client_id is not None:
            self.stored_sessions.changed(client_id, json.loads(message.body) if message.body else None)

    def _spawn(self, coro: Coroutine[Any, Any, object]) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        _background.add(task)
        task.add_done_callback(_background.discard)
