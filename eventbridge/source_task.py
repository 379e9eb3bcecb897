"""Event sources: messages of a core topic (all of them, or those of an MQTT topic filter) turned into CloudEvents
on a bus, as a sink task of the connector runtime (it reads the core, its "external system" is the bus).

How a message becomes an event (`message_event`):

    id               the message's unique id: a message read twice (after a crash) gives the same event id
    source           "mqgate/mqtt/<client id>" for MQTT messages ("mqgate/mqtt" without a client id),
                     "mqgate/topic/<core topic>" for other messages
    type             the source's `type` (mqgate.mqtt.message, mqgate.message by default)
    subject          the MQTT topic; for other messages their first key, if any
    time             when the message was born (its producer's clock), RFC 3339 UTC
    data             the body as JSON when it parses as JSON, with datacontenttype application/json;
                     else data_base64 with application/octet-stream
    mqttqos          extension: the MQTT QoS it was published with (MQTT messages)

Events of one batch are appended to the bus together, and only then does the runner commit the topic's offsets:
a crash appends them again (at least once; the ids are the same).
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
from typing import Any

from connectors.api import SinkRecord, SinkTask
from eventbridge.bus import EventBuses
from eventbridge.rule_model import EventSource

# The MQTT gateway's message properties and topic-filter matching: pure definitions shared with the gateway.
from mqtt_bridge.message_mapping import PROPERTY_CLIENT, PROPERTY_QOS, PROPERTY_TOPIC
from mqtt_bridge.topic import matches

log = logging.getLogger(__name__)


def message_event(source: EventSource, record: SinkRecord) -> dict[str, Any]:
    """The event (structured JSON form) a message becomes."""
    mqtt_topic = record.properties.get(PROPERTY_TOPIC)
    if mqtt_topic is not None:
        client = record.properties.get(PROPERTY_CLIENT)
        origin = f"mqgate/mqtt/{client}" if client else "mqgate/mqtt"
        subject: str | None = mqtt_topic
    else:
        origin = f"mqgate/topic/{record.topic}"
        subject = record.keys[0] if record.keys else None
    born = datetime.datetime.fromtimestamp(record.born_timestamp_ms / 1000, datetime.UTC)
    event: dict[str, Any] = {
        "specversion": "1.0",
        "id": record.msg_id,
        "source": origin,
        "type": source.type,
        "time": born.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
    }
    if subject:
        event["subject"] = subject
    qos = record.properties.get(PROPERTY_QOS)
    if mqtt_topic is not None and qos is not None and qos.isdigit():
        event["mqttqos"] = int(qos)
    try:
        data = json.loads(record.body, parse_constant=_not_json)
    except (UnicodeDecodeError, ValueError):
        event["datacontenttype"] = "application/octet-stream"
        event["data_base64"] = base64.b64encode(record.body).decode("ascii")
    else:
        event["datacontenttype"] = "application/json"
        event["data"] = data
    return event


def _not_json(name: str) -> None:
    # Python's json reads NaN and Infinity, which no JSON reader downstream takes.
    raise ValueError(f"{name} is not JSON")


class EventSourceTask(SinkTask):
    def __init__(self, source: EventSource, buses: EventBuses) -> None:
        self.source = source
        self.buses = buses
        self.forwarded = 0

    def wants(self, record: SinkRecord) -> bool:
        if self.source.mqtt is None:
            return True
        topic = record.properties.get(PROPERTY_TOPIC)
        return topic is not None and matches(self.source.mqtt, topic)

    async def put(self, records: list[SinkRecord]) -> None:
        events = [message_event(self.source, record) for record in records if self.wants(record)]
        if events:
            await self.buses.put(self.source.bus, events)
            self.forwarded += len(events)
