"""The targets of a rule file: each `targets:` entry of a rule read from its YAML node and checked (rule_file.py
reads the rest of the file; the node reader names file, line and column in every error).

    - {id: alerts, type: http, url: https://alerts.example/hook, ...}        an HTTP endpoint (CloudEvents)
    - {id: audit, type: topic, topic: audit-events, tag: cold, mode: binary} a core topic
    - {id: cmd, type: mqtt, topic: "devices/${$.data.device}/cmd", qos: 1, retain: false}   an MQTT topic
    - {id: ops, type: bus, bus: ops}                                         another bus, the event unchanged

Every type takes `retry_policy` and `dead_letter_topic`; all but `bus` take `transform` and `mode`.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from yaml.nodes import MappingNode, Node, ScalarNode

from core import TopicConfigError, validate_topic
from eventbridge.errors import TransformConfigError
from eventbridge.json_path import JsonPath, JsonPathSyntaxError
from eventbridge.rules.model import (
    DEFAULT_CONCURRENCY,
    DEFAULT_TIMEOUT_MS,
    MAX_CONCURRENCY,
    MAX_TIMEOUT_MS,
    ApiKeyAuth,
    BasicAuth,
    BusTarget,
    HttpTarget,
    MqttTarget,
    Target,
    TargetMode,
    TopicTarget,
)
from eventbridge.rules.node_reader import NodeReader
from eventbridge.rules.source_file import BUS_NAME
from eventbridge.targets.retry_policy import BackoffRetry, ExponentialDecayRetry, RetryPolicy, RetryStrategy
from eventbridge.targets.topic_template import TopicTemplateError, compile_topic_template
from eventbridge.targets.transform import TemplateOutput, Transform, TransformKind, TransformSpec, compile_transform

# AWS EventBridge: target ids are 1 to 64 of [.-_A-Za-z0-9].
TARGET_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
# RFC 9110 token.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Set by the HTTP target itself (CloudEvents binding, body framing); a rule may not override them.
_RESERVED_HEADERS = frozenset({"content-type", "content-length", "host", "transfer-encoding", "connection"})

_COMMON_KEYS = ("id", "type", "retry_policy", "dead_letter_topic")
_TARGET_KEYS = {
    "http": (*_COMMON_KEYS, "url", "mode", "headers", "timeout_ms", "concurrency", "auth", "transform"),
    "topic": (*_COMMON_KEYS, "topic", "mode", "tag", "transform"),
    "mqtt": (*_COMMON_KEYS, "topic", "qos", "retain", "mode", "transform"),
    # An event goes to another bus as it is: the rules of that bus match it, so it is not transformed.
    "bus": (*_COMMON_KEYS, "bus"),
}
_REQUIRED_KEYS = {"http": ("url",), "topic": ("topic",), "mqtt": ("topic",), "bus": ("bus",)}


def read_target(reader: NodeReader, rule_where: str, node: Node, rule_bus: str) -> Target:
    if not isinstance(node, MappingNode):
        raise reader.error(node, f"{rule_where}: target must be a mapping")
    type_node = next((value for key, value in node.value if isinstance(key, ScalarNode) and key.value == "type"), None)
    if type_node is None:
        raise reader.error(node, f"{rule_where}: target: 'type' is missing; use one of {', '.join(_TARGET_KEYS)}")
    target_type = reader.string(type_node, f"{rule_where}: target type")
    if target_type not in _TARGET_KEYS:
        known = ", ".join(_TARGET_KEYS)
        raise reader.error(type_node, f"{rule_where}: target type {target_type!r} is not one of {known}")
    fields = reader.mapping(
        node, f"{rule_where}: {target_type} target", _TARGET_KEYS[target_type], ("id", *_REQUIRED_KEYS[target_type])
    )
    target_id = reader.string(fields["id"][1], f"{rule_where}: target id", TARGET_ID, "use 1 to 64 of [A-Za-z0-9._-]")
    where = f"{rule_where}, target {target_id!r}"
    retry = _read_retry_policy(reader, where, fields["retry_policy"][1]) if "retry_policy" in fields else BackoffRetry()
    dead_letter_topic = None
    if "dead_letter_topic" in fields:
        dlq_node = fields["dead_letter_topic"][1]
        dead_letter_topic = reader.string(dlq_node, f"{where}: dead_letter_topic")
        _check_topic(reader, dlq_node, f"{where}: dead_letter_topic", dead_letter_topic)
    position = reader.position(node)
    if target_type == "bus":
        bus_node = fields["bus"][1]
        bus = reader.string(bus_node, f"{where}: bus", BUS_NAME, "use 1 to 64 of letters, digits, '_', '-'")
        if bus == rule_bus:
            raise reader.error(bus_node, f"{where}: bus {bus!r} is the rule's own bus; its events would loop")
        return BusTarget(target_id, bus, retry, dead_letter_topic, position)

    mode = reader.enum_value(fields["mode"][1], f"{where}: mode", TargetMode) if "mode" in fields else TargetMode.BINARY
    transform = (
        _read_transform(reader, where, fields["transform"][1])
        if "transform" in fields
        else compile_transform(TransformSpec())
    )
    if target_type == "topic":
        topic_node = fields["topic"][1]
        topic = reader.string(topic_node, f"{where}: topic")
        _check_topic(reader, topic_node, f"{where}: topic", topic)
        tag = reader.string(fields["tag"][1], f"{where}: tag") if "tag" in fields else None
        if tag is not None and "||" in tag:
            raise reader.error(fields["tag"][1], f"{where}: tag {tag!r}: '||' separates tags in a subscription")
        return TopicTarget(target_id, topic, mode, tag, transform, retry, dead_letter_topic, position)
    if target_type == "mqtt":
        topic_node = fields["topic"][1]
        text = reader.string(topic_node, f"{where}: topic")
        try:
            template = compile_topic_template(text)
        except TopicTemplateError as exc:
            raise reader.error(topic_node, f"{where}: topic: {exc}") from None
        qos = reader.integer(fields["qos"][1], f"{where}: qos", 0, 2) if "qos" in fields else 0
        retain = reader.boolean(fields["retain"][1], f"{where}: retain") if "retain" in fields else False
        return MqttTarget(target_id, template, qos, retain, mode, transform, retry, dead_letter_topic, position)

    url_node = fields["url"][1]
    url = reader.string(url_node, f"{where}: url")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise reader.error(url_node, f"{where}: url {url!r} is not an http:// or https:// URL with a host")
    auth = _read_auth(reader, where, fields["auth"][1]) if "auth" in fields else None
    headers, derived = _read_headers(reader, where, fields["headers"][1], auth) if "headers" in fields else ((), ())
    timeout_ms = (
        reader.integer(fields["timeout_ms"][1], f"{where}: timeout_ms", 1, MAX_TIMEOUT_MS)
        if "timeout_ms" in fields
        else DEFAULT_TIMEOUT_MS
    )
    concurrency = (
        reader.integer(fields["concurrency"][1], f"{where}: concurrency", 1, MAX_CONCURRENCY)
        if "concurrency" in fields
        else DEFAULT_CONCURRENCY
    )
    return HttpTarget(
        id=target_id,
        url=url,
        mode=mode,
        headers=headers,
        derived_headers=derived,
        timeout_ms=timeout_ms,
        concurrency=concurrency,
        auth=auth,
        transform=transform,
        retry_policy=retry,
        dead_letter_topic=dead_letter_topic,
        position=position,
    )


def _check_topic(reader: NodeReader, node: Node, where: str, topic: str) -> None:
    try:
        validate_topic(topic)
    except TopicConfigError as exc:
        raise reader.error(node, f"{where}: {exc}") from None


def _read_headers(
    reader: NodeReader, where: str, node: Node, auth: BasicAuth | ApiKeyAuth | None
) -> tuple[tuple[tuple[str, str], ...], tuple[tuple[str, JsonPath], ...]]:
    if not isinstance(node, MappingNode):
        raise reader.error(node, f"{where}: headers must be a mapping of header name to value or {{path: ...}}")
    static: list[tuple[str, str]] = []
    derived: list[tuple[str, JsonPath]] = []
    seen: set[str] = set()
    for key_node, value_node in node.value:
        name = reader.string(key_node, f"{where}: header name", _HEADER_NAME, "not a valid HTTP header name")
        lowered = name.lower()
        if lowered in seen:
            raise reader.error(key_node, f"{where}: header {name!r} given twice (header names ignore case)")
        seen.add(lowered)
        if lowered in _RESERVED_HEADERS or lowered.startswith("ce-"):
            raise reader.error(key_node, f"{where}: header {name!r} is set by the target itself")
        if lowered == "authorization" and isinstance(auth, BasicAuth):
            raise reader.error(key_node, f"{where}: header 'Authorization' conflicts with auth: basic")
        if isinstance(auth, ApiKeyAuth) and lowered == auth.header.lower():
            raise reader.error(key_node, f"{where}: header {name!r} conflicts with auth: api-key")
        if isinstance(value_node, MappingNode):
            spec = reader.mapping(value_node, f"{where}: header {name!r}", ["path"], ["path"])
            path_node = spec["path"][1]
            text = reader.string(path_node, f"{where}: header {name!r} path")
            try:
                derived.append((name, JsonPath.compile(text)))
            except JsonPathSyntaxError as exc:
                raise reader.error(path_node, f"{where}: header {name!r}: {exc}") from None
        else:
            value = reader.scalar(value_node, f"{where}: header {name!r}", "str", "a string (quote numbers)")
            if "\r" in value or "\n" in value:
                raise reader.error(value_node, f"{where}: header {name!r} contains a line break")
            static.append((name, value))
    return tuple(static), tuple(derived)


def _read_auth(reader: NodeReader, where: str, node: Node) -> BasicAuth | ApiKeyAuth:
    if not isinstance(node, MappingNode):
        raise reader.error(node, f"{where}: auth must be a mapping with 'type: basic' or 'type: api-key'")
    kind_fields = {key.value: value for key, value in node.value if isinstance(key, ScalarNode)}
    if "type" not in kind_fields:
        raise reader.error(node, f"{where}: auth: 'type' is missing; use basic or api-key")
    kind = reader.string(kind_fields["type"], f"{where}: auth type")
    if kind == "basic":
        fields = reader.mapping(node, f"{where}: auth", ["type", "username", "password"], ["username", "password"])
        username = reader.string(fields["username"][1], f"{where}: auth username")
        if ":" in username:
            raise reader.error(fields["username"][1], f"{where}: auth username may not contain ':' (RFC 7617)")
        return BasicAuth(username, reader.string(fields["password"][1], f"{where}: auth password"))
    if kind == "api-key":
        fields = reader.mapping(node, f"{where}: auth", ["type", "header", "value"], ["value"])
        header = "X-Api-Key"
        if "header" in fields:
            header = reader.string(fields["header"][1], f"{where}: auth header", _HEADER_NAME, "not a header name")
        return ApiKeyAuth(header, reader.string(fields["value"][1], f"{where}: auth value"))
    raise reader.error(kind_fields["type"], f"{where}: auth type {kind!r} is not one of basic, api-key")


_TRANSFORM_KEYS = {
    TransformKind.ORIGINAL: ("kind",),
    TransformKind.PART: ("kind", "path"),
    TransformKind.CONSTANT: ("kind", "value"),
    TransformKind.TEMPLATE: ("kind", "variables", "template", "output"),
}


def _read_transform(reader: NodeReader, where: str, node: Node) -> Transform:
    if not isinstance(node, MappingNode):
        raise reader.error(node, f"{where}: transform must be a mapping with 'kind'")
    kind_node = next((value for key, value in node.value if isinstance(key, ScalarNode) and key.value == "kind"), None)
    if kind_node is None:
        raise reader.error(node, f"{where}: transform: 'kind' is missing; use ORIGINAL, PART, CONSTANT or TEMPLATE")
    kind = reader.enum_value(kind_node, f"{where}: transform kind", TransformKind)
    required = [k for k in _TRANSFORM_KEYS[kind] if k not in ("output", "variables")]
    fields = reader.mapping(node, f"{where}: transform ({kind.value})", _TRANSFORM_KEYS[kind], required)
    what = f"{where}: transform"
    spec = TransformSpec(kind=kind)
    field_nodes: dict[str, Node] = {}
    if kind is TransformKind.PART:
        field_nodes["path"] = fields["path"][1]
        spec = TransformSpec(kind, path=reader.string(fields["path"][1], f"{what} path"))
    elif kind is TransformKind.CONSTANT:
        field_nodes["value"] = fields["value"][1]
        spec = TransformSpec(kind, value=reader.json_value(fields["value"][1], f"{what} value"))
    elif kind is TransformKind.TEMPLATE:
        variables: list[tuple[str, str]] = []
        if "variables" in fields:
            var_node = fields["variables"][1]
            if not isinstance(var_node, MappingNode):
                raise reader.error(var_node, f"{what} variables must be a mapping of name to JSONPath")
            for key_node, value_node in var_node.value:
                name = reader.string(key_node, f"{what} variable name")
                if f"variables.{name}" in field_nodes:
                    raise reader.error(key_node, f"{what} variable {name!r} given twice")
                field_nodes[f"variables.{name}"] = value_node
                variables.append((name, reader.string(value_node, f"{what} variable {name!r}")))
        template_node = fields["template"][1]
        field_nodes["template"] = template_node
        output = TemplateOutput.JSON
        if "output" in fields:
            output = reader.enum_value(fields["output"][1], f"{what} output", TemplateOutput)
        text = reader.scalar(template_node, f"{what} template", "str", "a string")
        spec = TransformSpec(kind, variables=tuple(variables), template=text, output=output)
    try:
        return compile_transform(spec)
    except TransformConfigError as exc:
        at = field_nodes.get(exc.field, node)
        offset = 0
        reason = f"{what} {exc.field}: {exc.reason}"
        if exc.template_line is not None:
            reason = f"{what} template line {exc.template_line}: {exc.reason}"
            # A block scalar (| or >) starts on the line after its indicator; elsewhere, stay on the node.
            if isinstance(at, ScalarNode) and at.style in ("|", ">"):
                offset = exc.template_line
        raise reader.error(at, reason, line_offset=offset) from None


_RETRY_KEYS = {
    RetryStrategy.BACKOFF_RETRY: ("strategy", "retries", "min_delay_s", "max_delay_s"),
    RetryStrategy.EXPONENTIAL_DECAY_RETRY: ("strategy", "retries", "max_age_s", "base_delay_s", "max_delay_s"),
}


def _read_retry_policy(reader: NodeReader, where: str, node: Node) -> RetryPolicy:
    what = f"{where}: retry_policy"
    if isinstance(node, ScalarNode):
        strategy = reader.enum_value(node, what, RetryStrategy)
        return BackoffRetry() if strategy is RetryStrategy.BACKOFF_RETRY else ExponentialDecayRetry()
    if not isinstance(node, MappingNode):
        raise reader.error(node, f"{what} must be a strategy name or a mapping with 'strategy'")
    strategy_node = next(
        (value for key, value in node.value if isinstance(key, ScalarNode) and key.value == "strategy"), None
    )
    if strategy_node is None:
        raise reader.error(node, f"{what}: 'strategy' is missing; use BACKOFF_RETRY or EXPONENTIAL_DECAY_RETRY")
    strategy = reader.enum_value(strategy_node, f"{what} strategy", RetryStrategy)
    fields = reader.mapping(node, f"{what} ({strategy.value})", _RETRY_KEYS[strategy])
    params: dict[str, Any] = {}
    for key, (_, value_node) in fields.items():
        if key == "retries":
            params[key] = reader.integer(value_node, f"{what} retries", 0, 10_000)
        elif key != "strategy":
            params[key] = reader.number(value_node, f"{what} {key}")
    try:
        if strategy is RetryStrategy.BACKOFF_RETRY:
            return BackoffRetry(**params)
        return ExponentialDecayRetry(**params)
    except ValueError as exc:
        raise reader.error(node, f"{what}: {exc}") from None
