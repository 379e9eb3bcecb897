"""EventBridge rules written in YAML files, validated with the position of every node, and loaded per directory.

A rule file holds one or more rules:

    rules:
      - name: cold-rooms                # [A-Za-z0-9._-], at most 64; unique per bus
        bus: default                    # optional, "default"
        description: rooms below 5 C    # optional
        enabled: true                   # optional, true
        pattern: {source: [{prefix: "mqgate/"}], data: {temp: [{numeric: ["<", 5]}]}}
        targets:
          - id: alerts                  # unique in the rule
            type: http
            url: https://alerts.example/hook
            mode: binary                # binary | structured (CloudEvents HTTP binding)
            headers:
              X-Team: ops               # static
              X-Room: {path: $.subject} # derived from the event by JSONPath
            timeout_ms: 5000
            concurrency: 8
            auth: {type: basic, username: u, password: p}   # or {type: api-key, header: X-Api-Key, value: k}
            transform: {kind: TEMPLATE, variables: {t: $.data.temp}, template: '{"t": {{ t }}}', output: json}
            retry_policy: {strategy: EXPONENTIAL_DECAY_RETRY, retries: 185, max_age_s: 86400}
            dead_letter_topic: alerts-dlq

Files are parsed with `yaml.compose`, so each value keeps its node and its position; an invalid file is refused
with `file:line:column: reason` (1-based) at the offending node. Unknown keys are refused, so a typo does not
silently drop a setting. `parse_rule_file` is pure; the records are in rule_model, the directory loader in
rule_directory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from core import TopicConfigError, validate_topic
from eventbridge.errors import RuleFileError, TransformConfigError
from eventbridge.event_schema import check_schema
from eventbridge.json_path import JsonPath, JsonPathSyntaxError
from eventbridge.node_reader import NodeReader
from eventbridge.retry_policy import (
    BackoffRetry,
    ExponentialDecayRetry,
    RetryPolicy,
    RetryStrategy,
)
from eventbridge.rule_model import (
    DEFAULT_BUS,
    DEFAULT_CONCURRENCY,
    DEFAULT_MQTT_EVENT_TYPE,
    DEFAULT_TIMEOUT_MS,
    DEFAULT_TOPIC_EVENT_TYPE,
    MAX_CONCURRENCY,
    MAX_TIMEOUT_MS,
    ApiKeyAuth,
    BasicAuth,
    EventSchema,
    EventSource,
    HttpTarget,
    Rule,
    RuleKey,
    RulePattern,
    TargetMode,
)
from eventbridge.transform import TemplateOutput, Transform, TransformKind, TransformSpec, compile_transform

# The MQTT topic-filter grammar, pure (no I/O, no gateway): one definition for the gateway and event sources.
from mqtt_bridge.topic import TopicError, validate_topic_filter

# AWS EventBridge: rule names and target ids are 1 to 64 of [.-_A-Za-z0-9].
_RULE_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")
# A bus is stored in a core topic, so its name keeps to the topic character set (no '.').
BUS_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# RFC 9110 token.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# Set by the HTTP target itself (CloudEvents binding, body framing); a rule may not override them.
_RESERVED_HEADERS = frozenset({"content-type", "content-length", "host", "transfer-encoding", "connection"})

# Rule files are configuration: a megabyte is far more than any hand-written set of rules.
MAX_RULE_FILE_CHARS = 1024 * 1024
# PyYAML's composer recurses per nesting level; deeper documents are refused before Python's recursion limit.
MAX_NESTING = 64


# HOOK(pattern compiler): the pattern compiler (eventbridge/pattern*.py) is called here, at load, so that a bad
# pattern refuses its file like any other bad field. It receives the pattern as parsed JSON and raises ValueError
# to refuse it; if the exception has a `path` attribute (a dotted path such as `detail.temp[0].numeric`, as
# eventbridge.pattern_errors.PatternError carries, or a sequence of keys and indexes), the error points at that
# node inside the pattern, else at the pattern itself. The loader keeps only the parsed JSON: the
# matcher is built from the RuleSet by its owner.
PatternCompileHook = Callable[[Mapping[str, Any]], object]


@dataclass(frozen=True, slots=True)
class RuleDocument:
    rules: tuple[Rule, ...]
    sources: tuple[EventSource, ...]
    schemas: tuple[EventSchema, ...] = ()


def parse_rule_file(path: str, text: str, *, compile_pattern: PatternCompileHook | None = None) -> tuple[Rule, ...]:
    """Parse and validate one rule file's text; `path` only names the file in positions and errors."""
    return parse_rule_document(path, text, compile_pattern=compile_pattern).rules


def parse_rule_document(path: str, text: str, *, compile_pattern: PatternCompileHook | None = None) -> RuleDocument:
    """Parse and validate one rule file's text: its rules and its event sources."""
    reader = NodeReader(path)
    if len(text) > MAX_RULE_FILE_CHARS:
        raise RuleFileError(path, 1, 1, f"file longer than {MAX_RULE_FILE_CHARS} characters; split it")
    nesting = _max_flow_or_block_nesting(text)
    if nesting is not None:
        raise RuleFileError(path, nesting[0], nesting[1], f"nested deeper than {MAX_NESTING} levels")
    try:
        root = yaml.compose(text, Loader=_LOADER)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, column = (mark.line + 1, mark.column + 1) if mark else (1, 1)
        raise RuleFileError(path, line, column, f"not valid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise RuleFileError(path, 1, 1, f"not valid YAML: {exc}") from None
    if root is None:
        raise RuleFileError(path, 1, 1, "file is empty; write 'rules:' with a list, or delete the file")
    top = reader.mapping(root, "rule file", ["rules", "sources", "schemas"])
    if not top:
        raise reader.error(root, "rule file: write 'rules:', 'sources:' or 'schemas:' with a list, or delete the file")
    sources = _read_sources(reader, top["sources"][1]) if "sources" in top else ()
    schemas = _read_schemas(reader, top["schemas"][1]) if "schemas" in top else ()
    if "rules" not in top:
        return RuleDocument((), sources, schemas)
    rule_nodes = reader.sequence(top["rules"][1], "rules")
    if not rule_nodes:
        raise reader.error(top["rules"][1], "rules is empty; give at least one rule, or delete the file")
    rules: list[Rule] = []
    names: set[RuleKey] = set()
    for node in rule_nodes:
        rule = _read_rule(reader, node, compile_pattern)
        if rule.key in names:
            raise reader.error(node, f"rule {rule.name!r} is defined twice on bus {rule.bus!r}")
        names.add(rule.key)
        rules.append(rule)
    return RuleDocument(tuple(rules), sources, schemas)


def _read_schemas(reader: NodeReader, node: Node) -> tuple[EventSchema, ...]:
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


def _read_sources(reader: NodeReader, node: Node) -> tuple[EventSource, ...]:
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
    name = reader.string(fields["name"][1], "source name", _RULE_NAME, "use 1 to 64 of letters, digits, '.', '_', '-'")
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


def _max_flow_or_block_nesting(text: str) -> tuple[int, int] | None:
    """Where the document first nests deeper than MAX_NESTING (line, column), or None. Counts collection starts
    from the token stream, so it runs before the recursive composer."""
    depth = 0
    try:
        for token in yaml.scan(text, Loader=_LOADER):
            if isinstance(token, yaml.BlockMappingStartToken | yaml.BlockSequenceStartToken
                          | yaml.FlowMappingStartToken | yaml.FlowSequenceStartToken):  # fmt: skip
                depth += 1
                if depth > MAX_NESTING:
                    return token.start_mark.line + 1, token.start_mark.column + 1
            elif isinstance(token, yaml.BlockEndToken | yaml.FlowMappingEndToken | yaml.FlowSequenceEndToken):
                depth -= 1
    except yaml.YAMLError:
        return None  # the composer reports it with its position
    return None


# libyaml's loader where PyYAML was built with it (the wheels are): ten times the pure-Python one, which took 20 s
# to read 10,000 rules. Same nodes, same positions.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_RULE_KEYS = ("name", "bus", "description", "enabled", "pattern", "targets")
_SOURCE_KEYS = ("name", "bus", "mqtt", "topic", "type", "enabled")
_TARGET_KEYS = (
    "id", "type", "url", "mode", "headers", "timeout_ms", "concurrency", "auth", "transform", "retry_policy",
    "dead_letter_topic",
)  # fmt: skip


def _read_rule(reader: NodeReader, node: Node, compile_pattern: PatternCompileHook | None) -> Rule:
    fields = reader.mapping(node, "rule", _RULE_KEYS, ["name", "pattern", "targets"])
    name = reader.string(fields["name"][1], "rule name", _RULE_NAME, "use 1 to 64 of letters, digits, '.', '_', '-'")
    where = f"rule {name!r}"
    bus = DEFAULT_BUS
    if "bus" in fields:
        bus = reader.string(fields["bus"][1], f"{where}: bus", BUS_NAME, "use 1 to 64 of letters, digits, '_', '-'")
    description = (
        reader.scalar(fields["description"][1], f"{where}: description", "str", "a string")
        if ("description" in fields)
        else ""
    )
    enabled = reader.boolean(fields["enabled"][1], f"{where}: enabled") if "enabled" in fields else True

    pattern_node = fields["pattern"][1]
    if not isinstance(pattern_node, MappingNode) or not pattern_node.value:
        raise reader.error(pattern_node, f"{where}: pattern must be a non-empty mapping")
    pattern = RulePattern(reader.json_value(pattern_node, f"{where}: pattern"), reader.position(pattern_node))
    if compile_pattern is not None:
        _check_pattern(reader, where, pattern_node, pattern, compile_pattern)

    target_nodes = reader.sequence(fields["targets"][1], f"{where}: targets")
    if not target_nodes:
        raise reader.error(fields["targets"][1], f"{where}: targets is empty; give at least one target")
    targets: list[HttpTarget] = []
    for target_node in target_nodes:
        target = _read_target(reader, where, target_node)
        if any(t.id == target.id for t in targets):
            raise reader.error(target_node, f"{where}: target id {target.id!r} is used twice")
        targets.append(target)
    return Rule(name, bus, pattern, tuple(targets), enabled, description, reader.position(node))


def _check_pattern(
    reader: NodeReader, where: str, node: Node, pattern: RulePattern, compile_pattern: PatternCompileHook
) -> None:
    try:
        compile_pattern(pattern.value)
    except ValueError as exc:
        raise reader.error(_node_at(node, getattr(exc, "path", ())), f"{where}: pattern: {exc}") from None


_PATH_STEP = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def _path_steps(path: object) -> list[object]:
    """`detail.temp[0].numeric` -> ["detail", "temp", 0, "numeric"]; a sequence is taken as it is."""
    if isinstance(path, str):
        return [key if key else int(index) for key, index in _PATH_STEP.findall(path)]
    if isinstance(path, Sequence):
        return list(path)
    return []


def _node_at(node: Node, path: object) -> Node:
    """The deepest node reachable along `path` (mapping keys and list indexes) from `node`."""
    for step in _path_steps(path):
        if isinstance(node, MappingNode):
            match = [value for key, value in node.value if key.value == step]
            if not match:
                break
            node = match[0]
        elif isinstance(node, SequenceNode) and isinstance(step, int) and 0 <= step < len(node.value):
            node = node.value[step]
        else:
            break
    return node


def _read_target(reader: NodeReader, rule_where: str, node: Node) -> HttpTarget:
    fields = reader.mapping(node, f"{rule_where}: target", _TARGET_KEYS, ["id", "type", "url"])
    target_id = reader.string(fields["id"][1], f"{rule_where}: target id", _RULE_NAME, "use 1 to 64 of [A-Za-z0-9._-]")
    where = f"{rule_where}, target {target_id!r}"
    target_type = reader.string(fields["type"][1], f"{where}: type")
    if target_type != "http":
        raise reader.error(fields["type"][1], f"{where}: type {target_type!r} is not supported; use 'http'")
    url_node = fields["url"][1]
    url = reader.string(url_node, f"{where}: url")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise reader.error(url_node, f"{where}: url {url!r} is not an http:// or https:// URL with a host")

    mode = reader.enum_value(fields["mode"][1], f"{where}: mode", TargetMode) if "mode" in fields else TargetMode.BINARY
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
    transform = _read_transform(reader, where, fields["transform"][1]) if "transform" in fields else None
    retry = _read_retry_policy(reader, where, fields["retry_policy"][1]) if "retry_policy" in fields else None
    dead_letter_topic = None
    if "dead_letter_topic" in fields:
        dlq_node = fields["dead_letter_topic"][1]
        dead_letter_topic = reader.string(dlq_node, f"{where}: dead_letter_topic")
        try:
            validate_topic(dead_letter_topic)
        except TopicConfigError as exc:
            raise reader.error(dlq_node, f"{where}: dead_letter_topic: {exc}") from None
    return HttpTarget(
        id=target_id,
        url=url,
        mode=mode,
        headers=headers,
        derived_headers=derived,
        timeout_ms=timeout_ms,
        concurrency=concurrency,
        auth=auth,
        transform=transform or compile_transform(TransformSpec()),
        retry_policy=retry or BackoffRetry(),
        dead_letter_topic=dead_letter_topic,
        position=reader.position(node),
    )


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
