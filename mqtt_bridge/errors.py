"""Exceptions of the MQTT gateway.

Messages say what went wrong, where (client, packet, file and line) and what to do about it. A
`ProtocolError` ends one client's connection, never the listener: the server catches it per connection.
"""

from __future__ import annotations


class MqttBridgeError(Exception):
    """Base class of every error the MQTT gateway raises."""


class ConfigError(MqttBridgeError, ValueError):
    """A gateway setting, password file or ACL file cannot be used; says which file and line."""


class ProtocolError(MqttBridgeError):
    """The peer broke the MQTT protocol; the connection is closed (v5: after a DISCONNECT with `reason_code`).

    `reason_code` is the MQTT 5 reason code to send (0x82 protocol error unless a subclass says otherwise).
    """

    reason_code = 0x82

    def __init__(self, message: str, reason_code: int | None = None) -> None:
        super().__init__(message)
        if reason_code is not None:
            self.reason_code = reason_code


class MalformedPacket(ProtocolError):
    """The bytes do not decode as an MQTT packet of the negotiated protocol level."""

    reason_code = 0x81


class PacketTooLarge(ProtocolError):
    """The packet's remaining length exceeds the maximum packet size we accept."""

    reason_code = 0x95


class UnsupportedProtocol(ProtocolError):
    """The CONNECT asks for a protocol level other than 4 (3.1.1) or 5."""

    reason_code = 0x84


class StoreNotDurableError(MqttBridgeError):
    """A message was written but the disk did not confirm it in time (SYNC_FLUSH's FLUSH_DISK_TIMEOUT): it must not
    be acknowledged as durable (publish_refusal.py says what the client is told instead)."""
