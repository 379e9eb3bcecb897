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
from mqtt_bridge.sessions.session import Session, Subscription, session_group, split_key
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
        # Commits a position in another broker group's light queue there (Membership.commit; on a cluster).
        self.remote_commit: Callable[[str, str, str, int], None] = lambda group, consumer, queue, offset: None
        # On a cluster: a session record written here is written to the other groups too (Membership.copy), and
        # names this group, where the session is.
        self.copy: Callable[[Message], Coroutine[Any, Any, None]] | None = None
        self.group: str | None = None
        # Client ids whose session record was appended (or is being): their end appends a deletion.
        self._recorded: set[str] = set()

    def __len__(self) -> int:
        return len(self.sessions)

    def values(self) -> Iterable[Session]:
        return self.sessions.values()

    def items(self) -> Iterable[tuple[str, Session]]:
        return self.sessions.items()

    def commit(self, session: Session, queues: Iterable[str] | None = None) -> None:
        """Commit the session's positions in `queues` (default: all it reads) as core consumer offsets: this
        group's here, another group's there (remote_commit)."""
        group = session_group(session.client_id, session.generation)
        keys = session.read_offsets if queues is None else queues
        own = session.own_queues() if queues is None else None
        for key in list(keys):
            if key not in session.read_offsets:
                continue
            queue, remote_group = split_key(key)
            if remote_group is not None:
                self.remote_commit(remote_group, group, queue, session.committed(key))
            elif own is None or queue in own:
                self.broker.commit_offset(group, queue, 0, session.committed(key))

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
        if self.group is not None:
            data["group"] = self.group
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
        """The session ended: its record, if it has one here, is deleted (in the background). On a cluster a record
        that names another group is that group's to delete."""
        entry = self.records.entries.get(client_id)
        if client_id in self._recorded or (entry is not None and self.held_here(entry)):
            self._recorded.discard(client_id)
            spawn(self._append(client_id, None))

    async def delete_record(self, client_id: str) -> None:
        """Delete a session's record now, on every group (a clean start on a cluster)."""
        self._recorded.discard(client_id)
        await self._append(client_id, None)

    async def _append(self, client_id: str, data: dict[str, object] | None) -> bool:
        """Append a session record (None: its deletion); the table of records follows once it is stored
        (`record_stored`, from the broker's stored listener). False, logged, if the core refused it."""
        body = json.dumps(data).encode() if data is not None else b""
        self._recorded.add(client_id)
        message = Message(topic=SESSIONS_TOPIC, body=body, properties={PROPERTY_SESSION: client_id})
        try:
            await self.broker.send(message)
        except CoreError as exc:
            log.error("session %r: state not stored: %s", client_id, exc)
            return False
        if self.copy is not None:
            await self.copy(Message(topic=SESSIONS_TOPIC, body=body, properties={PROPERTY_SESSION: client_id}))
        return True

    def moved(self, client_id: str) -> None:
        """The session went to another node, which writes its record from now on: its end here deletes nothing."""
        self._recorded.discard(client_id)

    def held_here(self, data: dict[str, object]) -> bool:
        """Whether a session record read back at start is this node's (on a cluster, others' records are copies:
        where each session is)."""
        return self.group is None or data.get("group") in (None, self.group)

    def record_stored(self, message: Message) -> None:
        """A session record reached the log: it is what a restart reads back."""
        client_id = message.properties.get(PROPERTY_SESSION)
        if client_id is not None:
            self.records.changed(client_id, json.loads(message.body) if message.body else None)
