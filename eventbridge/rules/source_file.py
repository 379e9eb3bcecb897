"""The event sources and event schemas of a rule file (`sources:` and `schemas:`), read from their YAML nodes and
checked (rule_file.py reads the rest of the file)."""

from __future__ import annotations

import re

from yaml.nodes import MappingNode, Node

from core import TopicConfigError, validate_topic
from eventbridge.event_schema import check_schema
from eventbridge.rules.model import (
    DEFAULT_BUS,
    DEFAULT_MQTT_EVENT_TYPE,
    DEFAULT_TOPIC_EVENT_TYPE,
    EventSchema,
    EventSource,
)
from eventbridge.rules.node_reader import NodeReader

# The MQTT topic-filter grammar, pure (no I/O, no gateway): one definition for the gateway and event sources.
from mqtt_bridge.topics.topic import TopicError, validate_topic_filter

# 1 to 64 of [.-_A-Za-z0-9], as rule names.
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
# A bus is stored in a core topic, so its name keeps to the topic character set (no '.').
BUS_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")

_SOURCE_KEYS = ("name", "bus", "mqtt", "topic", "type", "enabled")


def read_schemas(reader: NodeReader, node: Node) -> tuple[EventSchema, ...]:
    nodes = reader.sequence(node, "schemas")
    if not nodes:
        raise reader.error(node, "schemas is empty; give at least one schema, or leave the key out")
    schemas: list[EventSchema] = []
    for schema_node in nodes:
        fields = reader.mapping(schema_node, "schema entry", ("source", "type", "schema"), ("source", "type", "schema"))
        source = reader.string(fields["source"][1], "schema entry: source")
        if "*" in source[:-1]:
            raise reader.error(fields["source"][1], f"schema entry: source {source!r}: '*' may only end a prefix")
        event_type = reader.string(fields["type"][1], "schema entry: type")
        where = f"schema for source {source!r} type {event_type!r}"
        value_node = fields["schema"][1]
        if not isinstance(value_node, MappingNode):
            raise reader.error(value_node, f"{where}: schema must be a mapping (a JSON Schema object)")
        schema = reader.json_value(value_node, f"{where}: schema")
        problem = check_schema(schema)
        if problem is not None:
            raise reader.error(value_node, f"{where}: {problem}")
        schemas.append(EventSchema(source, event_type, schema, reader.position(schema_node)))
    return tuple(schemas)


def read_sources(reader: NodeReader, node: Node) -> tuple[EventSource, ...]:
    nodes = reader.sequence(node, "sources")
    if not nodes:
        raise reader.error(node, "sources is empty; give at least one source, or leave the key out")
    sources: list[EventSource] = []
    for source_node in nodes:
        source = _read_source(reader, source_node)
        if any(other.name == source.name for other in sources):
            raise reader.error(source_node, f"source {source.name!r} is defined twice")
        sources.append(source)
    return tuple(sources)


def _read_source(reader: NodeReader, node: Node) -> EventSource:
    fields = reader.mapping(node, "source", _SOURCE_KEYS, ["name"])
    name = reader.string(fields["name"][1], "source name", _NAME, "use 1 to 64 of letters, digits, '.', '_', '-'")
    where = f"source {name!r}"
    if ("mqtt" in fields) == ("topic" in fields):
        raise reader.error(
            node, f"{where}: give exactly one of 'mqtt' (an MQTT topic filter) or 'topic' (a core topic)"
        )
    bus = DEFAULT_BUS
    if "bus" in fields:
        bus = reader.string(fields["bus"][1], f"{where}: bus", BUS_NAME, "use 1 to 64 of letters, digits, '_', '-'")
    enabled = reader.boolean(fields["enabled"][1], f"{where}: enabled") if "enabled" in fields else True
    mqtt = topic = None
    if "mqtt" in fields:
        mqtt_node = fields["mqtt"][1]
        mqtt = reader.string(mqtt_node, f"{where}: mqtt")
        first = mqtt.split("/", 1)[0]  # any first level works: the gateway's mapping names its core topic
        if first in ("+", "#") or first.startswith("$share"):
            raise reader.error(
                mqtt_node, f"{where}: mqtt {mqtt!r}: the first level names the core topic read; spell it out"
            )
        try:
            validate_topic_filter(mqtt)
        except TopicError as exc:
            raise reader.error(mqtt_node, f"{where}: {exc}") from None
        default_type = DEFAULT_MQTT_EVENT_TYPE
    else:
        topic_node = fields["topic"][1]
        topic = reader.string(topic_node, f"{where}: topic")
        _check_topic(reader, topic_node, where, topic)
        default_type = DEFAULT_TOPIC_EVENT_TYPE
    event_type = reader.string(fields["type"][1], f"{where}: type") if "type" in fields else default_type
    return EventSource(name, bus, event_type, mqtt, topic, enabled, reader.position(node))


def _check_topic(reader: NodeReader, node: Node, where: str, topic: str) -> None:
    try:
        validate_topic(topic)
    except TopicConfigError as exc:
        raise reader.error(node, f"{where}: {exc}") from None
