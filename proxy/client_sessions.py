"""The clients the endpoint knows, by client id (the `x-mq-client-id` metadata every official client sends): what each
said it is in its Telemetry settings, its open Telemetry stream (the way to send it commands: transaction
check-backs), the producer topics it answers check-backs for, and the messages held for it (proxy.held_messages).

A session starts with a client's first call and ends with NotifyClientTermination, or when the client has been
silent for `expire_after_s` (RocketMQ's channelExpiredTimeout: 120 s; the official clients send a heartbeat every
10 s). Ending it is the service's work (proxy.service): unregister its checkers, let its held messages go.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from proxy.held_messages import HeldMessages
from proxy.stubs import Settings, TelemetryCommand

# ProxyConfig.channelExpiredTimeout.
SESSION_EXPIRE_S = 120.0
# Commands waiting for a client's Telemetry stream to take them; a client that reads none is not worth more.
MAX_PENDING_COMMANDS = 1024


@dataclass(slots=True, eq=False)
class ClientSession:
    client_id: str
    last_seen: float
    client_type: int = 0
    group: str = ""
    settings: Settings | None = None
    # The open Telemetry stream's outgoing commands; None when the client has none open. None in the queue ends it.
    outbox: asyncio.Queue[TelemetryCommand | None] | None = None
    # topic -> the call that unregisters this client as the topic's transaction checker
    checkers: dict[str, Callable[[], None]] = field(default_factory=dict)
    held: HeldMessages = field(default_factory=HeldMessages)

    def send(self, command: TelemetryCommand) -> bool:
        """Queue a command for the client's Telemetry stream; False when it has none open (or reads none)."""
        outbox = self.outbox
        if outbox is None or outbox.qsize() >= MAX_PENDING_COMMANDS:
            return False
        outbox.put_nowait(command)
        return True


class ClientSessions:
    def __init__(self, expire_after_s: float = SESSION_EXPIRE_S, clock: Callable[[], float] = time.monotonic) -> None:
        self.expire_after_s = expire_after_s
        self.clock = clock
        self._sessions: dict[str, ClientSession] = {}

    def __len__(self) -> int:
        return len(self._sessions)

    def __iter__(self) -> Iterator[ClientSession]:
        return iter(list(self._sessions.values()))

    @property
    def holding(self) -> bool:
        """Whether any client has messages held for it (proxy.held_messages)."""
        return any(session.held for session in self._sessions.values())

    def touch(self, client_id: str) -> ClientSession:
        """The session of `client_id`, started if new, marked as seen now."""
        now = self.clock()
        session = self._sessions.get(client_id)
        if session is None:
            session = self._sessions[client_id] = ClientSession(client_id, now)
        else:
            session.last_seen = now
        return session

    def find(self, client_id: str) -> ClientSession | None:
        return self._sessions.get(client_id)

    def remove(self, client_id: str) -> ClientSession | None:
        return self._sessions.pop(client_id, None)

    def take_expired(self) -> list[ClientSession]:
        """Sessions silent past the expiry, removed; a session with an open Telemetry stream is alive."""
        deadline = self.clock() - self.expire_after_s
        gone = [s for s in self._sessions.values() if s.last_seen < deadline and s.outbox is None]
        for session in gone:
            del self._sessions[session.client_id]
        return gone
