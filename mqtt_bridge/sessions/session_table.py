"""The session table: every session (connected, or persistent and waiting for its client), the rules they follow
(session_rules.py), the connection of each connected client, and what the core keeps of them: a session record
per persistent session (state_records.py) and a consumer group per session, whose offsets are its read
positions. A restart reads the records back."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any

from core import Broker, CoreError, Message, StateTable
from mqtt_bridge.config import MqttConfig
from mqtt_bridge.link import Link
from mqtt_bridge.sessions.session import Session, Subscription, session_group
from mqtt_bridge.sessions.session_rules import SessionRules
from mqtt_bridge.sessions.state_records import PROPERTY_SESSION, SESSIONS_TOPIC, session_change, session_value

log = logging.getLogger("mqtt_bridge.gateway")

_background: set[asyncio.Task[object]] = set()


def spawn(coro: Coroutine[Any, Any, object]) -> None:
    """Run `coro` in the background, keeping a reference until it ends (the loop keeps only weak ones)."""
    task = asyncio.get_running_loop().create_task(coro)
    _background.add(task)
    task.add_done_callback(_background.discard)


class SessionTable:
    def __init__(
        self,
        broker: Broker,
        config: MqttConfig,
        state_dir: Path,
        links: dict[str, Link],
        group_positions: Callable[[Iterable[Subscription]], dict[str, int]],
    ) -> None:
        """`links`: the connected clients by client id, kept here (shared with the parts that wake them).
        `group_positions`: the committed positions of shared subscriptions' groups (SharedSubscriptions), which a
        session record holds as well."""
        self.broker = broker
        self.rules = SessionRules(config.session_expiry_max_s)
        self.sessions = self.rules.sessions
        self.links = links
        self._group_positions = group_positions
        self.records: StateTable[dict[str, object]] = StateTable(
            broker, SESSIONS_TOPIC, Path(state_dir) / "sessions.json", session_change, lambda v: v, session_value
        )
        # Client ids whose session record was appended (or is being): their end appends a deletion.
        self._recorded: set[str] = set()

    def __len__(self) -> int:
        return len(self.sessions)

    def values(self) -> Iterable[Session]:
        return self.sessions.values()

    def items(self) -> Iterable[tuple[str, Session]]:
        return self.sessions.items()

    def commit(self, session: Session, queues: Iterable[str] | None = None) -> None:
        """Commit the session's positions in `queues` (default: all it reads) as core consumer offsets."""
        group = session_group(session.client_id)
        for queue in session.own_queues() if queues is None else queues:
            if queue in session.read_offsets:
                self.broker.commit_offset(group, queue, 0, session.committed(queue))

    def commit_all(self) -> None:
        for session in self.sessions.values():
            if session.persistent:
                self.commit(session)

    def record_of(
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
        subs = session.subscriptions if subscriptions is None else subscriptions
        positions.update(self._group_positions(subs.values()))
        return data

    def store(self, session: Session) -> None:
        """Append the session's record in the background."""
        spawn(self._append(session.client_id, self.record_of(session)))

    async def store_now(self, session: Session, data: dict[str, object] | None = None) -> bool:
        """Store a persistent session's subscriptions before SUBACK/UNSUBACK (they must survive a crash); False if
        the core refused the record. `data`: the record to store, if not the session as it is."""
        record = data if data is not None else self.record_of(session)
        return await self._append(session.client_id, record)

    def forget(self, client_id: str) -> None:
        """The session ended: its record, if it has one, is deleted (in the background)."""
        if client_id in self.records.entries or client_id in self._recorded:
            self._recorded.discard(client_id)
            spawn(self._append(client_id, None))

    async def _append(self, client_id: str, data: dict[str, object] | None) -> bool:
        """Append a session record (None: its deletion); the table of records follows once it is stored
        (`record_stored`, from the broker's stored listener). False, logged, if the core refused it."""
        body = json.dumps(data).encode() if data is not None else b""
        self._recorded.add(client_id)
        try:
            await self.broker.send(Message(topic=SESSIONS_TOPIC, body=body, properties={PROPERTY_SESSION: client_id}))
        except CoreError as exc:
            log.error("session %r: state not stored: %s", client_id, exc)
            return False
        return True

    def record_stored(self, message: Message) -> None:
        """A session record reached the log: it is what a restart reads back."""
        client_id = message.properties.get(PROPERTY_SESSION)
        if client_id is not None:
            self.records.changed(client_id, json.loads(message.body) if message.body else None)
