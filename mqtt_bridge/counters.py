"""What the MQTT gateway counts, read by the metrics, the admin API and the $SYS tree: messages published (stored),
delivered, dropped (a session's backlog past max_queued_messages) and refused, the refusals by MQTT 5 reason code,
and what every connection received and sent (`MqttTraffic`, which each `MqttConnection` updates itself)."""

from __future__ import annotations

from mqtt_bridge.wire.protocol import MqttTraffic


class GatewayCounters:
    __slots__ = ("delivered", "dropped", "published", "refusals", "refused", "traffic")

    def __init__(self) -> None:
        self.published = 0
        self.delivered = 0
        self.dropped = 0
        self.refused = 0
        # PUBLISHes refused, by MQTT 5 reason code (publish_refusal.py; 0x95 and 0x93 for the packet too large and
        # receive maximum exceeded, which end the connection).
        self.refusals: dict[int, int] = {}
        self.traffic = MqttTraffic()

    def refusal(self, reason_code: int) -> None:
        self.refused += 1
        self.refusals[reason_code] = self.refusals.get(reason_code, 0) + 1
