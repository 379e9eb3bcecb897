"""What the gateway needs of one client connection, whatever its transport (listener.py implements it): the
protocol object to answer through, who the client is, its session, and the few controls delivery uses.

A Protocol rather than the listener's class, so that the gateway imports nothing of the network side and the
modules of mqtt_bridge form no import cycle (tests/mqtt_bridge/test_module_graph.py checks it)."""

from __future__ import annotations

from typing import Protocol

import mqtt5

from mqtt_bridge.message_mapping import MqttMessage
from mqtt_bridge.sessions.session import Session
from mqtt_bridge.wire.protocol import MqttConnection


class RetainedQueue(Protocol):
    """Retained messages waiting to be sent after a SUBACK: (message, QoS, subscription identifier)."""

    def __bool__(self) -> bool: ...

    def __getitem__(self, index: int) -> tuple[MqttMessage, int, int | None]: ...

    def append(self, item: tuple[MqttMessage, int, int | None]) -> None: ...

    def popleft(self) -> tuple[MqttMessage, int, int | None]: ...


class Wakeable(Protocol):
    def is_set(self) -> bool: ...

    def set(self) -> None: ...

    def clear(self) -> None: ...

    async def wait(self) -> None: ...


class Link(Protocol):
    client_id: str
    peer: str  # the client's address, HOST:PORT, for logs and the admin API
    username: str | None
    session: Session | None
    # Closed because a new connection took its session over (its end is the session rules', not its own).
    taken_over: bool
    # False while the transport's write buffer is full: delivery waits.
    writable: bool

    @property
    def closed(self) -> bool:
        """The connection is ending: nothing more it sent is handled."""

    @property
    def conn(self) -> MqttConnection: ...

    @property
    def retained(self) -> RetainedQueue: ...

    @property
    def woken(self) -> Wakeable: ...

    def wake(self) -> None:
        """Make the delivery loop look for work (new messages, a window that opened)."""

    def flush(self) -> None:
        """Write what the protocol object queued."""

    def close(self, reason: mqtt5.DisconnectReasonCode) -> None:
        """Server-side close (MQTT 5: DISCONNECT with the reason first)."""

    def connect_answered(self) -> None:
        """The CONNECT was answered: a refused connection ends; an accepted one keeps to its keep alive."""

    def client_disconnected(self, publish_will: bool) -> None:
        """The client's DISCONNECT was handled: the connection ends (with the will if the client asked)."""

    def start_delivery(self) -> None: ...

    def stop_delivery(self) -> None: ...
