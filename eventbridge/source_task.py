"""Event sources: messages of a core topic (all of them, or those of an MQTT topic filter) turned into CloudEvents
on a bus, as a sink task of the connector runtime (it reads the core, its "external system" is the bus).

How a message becomes an event (`message_event`):

    id               the message's unique id: a message read twice (after a crash) gives the same event id
    source           "mqgate/mqtt/<client id>" for MQTT messages ("mqgate/mqtt" without a client id),
                     "mqgate/topic/<core topic>" for other messages
    type             the source's `type` (mqgate.mqtt.message, mqgate.message by default)
    subject          the MQTT topic; for other messages their first key, if any
    time             when the message was born (its producer's clock; the MQTT gateway's when it got the PUBLISH),
                     else when it was stored; RFC 3339 UTC
    data             the body as JSON when it parses as JSON, with datacontenttype application/json;
                     else data_base64 with application/octet-stream
    mqttqos          extension: the MQTT QoS it was published with (MQTT messages)

An event that breaks a schema of the event center (event_schema) goes to the bus's dead-letter topic with the
reason (EB_DLQ_SOURCE names the source), since its message was acknowledged to the device long before.

Events of one batch are appended to the bus together, and only then does the runner commit the topic's offsets:
a crash appends them again (at least once; the ids are the same).
"""

from __future__ import annotations

import base64
import datetime
import json
import logging
from collections.abc import Callable
from typing import Any

from connectors.api import SinkRecord, SinkTask
from core import Producer
from eventbridge.bus import EventBuses, default_dead_letter_topic, encode_event
from eventbridge.event_schema import SchemaRegistry
from eventbridge.rules.model import EventSource
from eventbridge.targets.target_task import (
    MAX_ERROR_CHARS,
    PROPERTY_DLQ_BUS,
    PROPERTY_DLQ_ERROR,
    PROPERTY_DLQ_ORIGIN,
    PROPERTY_DLQ_SOURCE,
)

# The MQTT gateway's message properties and topic-filter matching: pure definitions shared with the gateway.
from mqtt_bridge.message_mapping import PROPERTY_QOS, mqtt_client_of, mqtt_view
from mqtt_bridge.topics.topic import matches

log = logging.getLogger(__name__)


def message_event(source: EventSource, record: SinkRecord) -> dict[str, Any]:
    """The event (structured JSON form) a message becomes."""
    view = mqtt_view(record.properties, record.body)
    mqtt_topic, body = view if view is not None else (None, record.body)
    if mqtt_topic is not None:
        client = mqtt_client_of(record.properties, record.body)
        origin = f"mqgate/mqtt/{client}" if client else "mqgate/mqtt"
        subject: str | None = mqtt_topic
    else:
        origin = f"mqgate/topic/{record.topic}"
        subject = record.keys[0] if record.keys else None
    # A producer that stamped no birth time (0) gets the time the core stored the message.
    born_ms = record.born_timestamp_ms or record.store_timestamp_ms
    born = datetime.datetime.fromtimestamp(born_ms / 1000, datetime.UTC)
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
        data = json.loads(body, parse_constant=_not_json)
    except (UnicodeDecodeError, ValueError):
        event["datacontenttype"] = "application/octet-stream"
        event["data_base64"] = base64.b64encode(body).decode("ascii")
    else:
        event["datacontenttype"] = "application/json"
        event["data"] = data
    return event


def _not_json(name: str) -> None:
    # Python's json reads NaN and Infinity, which no JSON reader downstream takes.
    raise ValueError(f"{name} is not JSON")


class EventSourceTask(SinkTask):
    def __init__(self, source: EventSource, buses: EventBuses, schemas: Callable[[], SchemaRegistry]) -> None:
        self.source = source
        self.buses = buses
        self.schemas = schemas  # the registry in force, read per batch: a reload applies without a restart
        self.producer = Producer(buses.broker, "eventbridge-sources")
        self.forwarded = 0
        self.refused = 0

    def wants(self, record: SinkRecord) -> bool:
        if self.source.mqtt is None:
            return True
        view = mqtt_view(record.properties, record.body)
        return view is not None and matches(self.source.mqtt, view[0])

    async def put(self, records: list[SinkRecord]) -> None:
        schemas = self.schemas()
        events = []
        for record in records:
            if not self.wants(record):
                continue
            event = message_event(self.source, record)
            violation = schemas.violation(event)
            if violation is None:
                events.append(event)
            else:
                await self._refuse(record, event, violation)
        if events:
            await self.buses.put(self.source.bus, events)
            self.forwarded += len(events)

    async def _refuse(self, record: SinkRecord, event: dict[str, Any], violation: str) -> None:
        """An event the event center refuses: the message was acknowledged to its producer long ago, so it goes
        to the bus's dead-letter topic with the reason rather than being dropped."""
        topic = default_dead_letter_topic(self.source.bus)
        if not self.buses.broker.has_topic(topic):
            self.buses.broker.create_topic(topic, 1)
        properties = {
            PROPERTY_DLQ_BUS: self.source.bus,
            PROPERTY_DLQ_SOURCE: self.source.name,
            PROPERTY_DLQ_ERROR: violation[:MAX_ERROR_CHARS],
            PROPERTY_DLQ_ORIGIN: f"{record.topic}/{record.queue_id}/{record.queue_offset}",
        }
        await self.producer.send(topic, encode_event(event), keys=[str(event["id"])], properties=properties)
        self.refused += 1
        log.warning("source %r: event %s refused (sent to %r): %s", self.source.name, event["id"], topic, violation)
