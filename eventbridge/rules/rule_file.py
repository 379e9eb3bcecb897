"""EventBridge rules written in YAML files, validated with the position of every node, and loaded per directory.

A rule file holds one or more rules:

    rules:
      - name: cold-rooms                # [A-Za-z0-9._-], at most 64; unique per bus
        bus: default                    # optional, "default"
        description: rooms below 5 C    # optional
        enabled: true                   # optional, true
        pattern: {source: [{prefix: "mqgate/"}], data: {temp: [{numeric: ["<", 5]}]}}
        schedule: cron(0/15 8-17 ? * MON-FRI *)   # or rate(5 minutes); a pattern, a schedule, or both
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

A rule with a `schedule` (schedule_expression: AWS's rate() and six-field cron(), in UTC) is also sent a "Scheduled
Event" at each fire time (schedules/scheduler.py). A rule has a pattern, a schedule or both, as AWS PutRule takes them;
one with only a schedule is matched by no event.

Files are parsed with `yaml.compose`, so each value keeps its node and its position; an invalid file is refused
with `file:line:column: reason` (1-based) at the offending node. Unknown keys are refused, so a typo does not
silently drop a setting. `parse_rule_file` is pure; the records are in rule_model, the directory loader in
rule_directory. Targets (target_file), sources and schemas (source_file) and archives (`archives:`, archive_file)
are read by modules of their own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from eventbridge.errors import RuleFileError, ScheduleError
from eventbridge.rules.archive_file import read_archives
from eventbridge.rules.model import (
    DEFAULT_BUS,
    Archive,
    EventSchema,
    EventSource,
    Rule,
    RuleKey,
    Target,
)
from eventbridge.rules.node_reader import NodeReader
from eventbridge.rules.pattern_field import PatternCompileHook, read_pattern
from eventbridge.rules.source_file import BUS_NAME, read_schemas, read_sources
from eventbridge.rules.target_file import read_target
from eventbridge.schedules.expression import Schedule, parse_schedule

# AWS EventBridge: rule names and target ids are 1 to 64 of [.-_A-Za-z0-9].
_RULE_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")

# Rule files are configuration: a megabyte is far more than any hand-written set of rules.
MAX_RULE_FILE_CHARS = 1024 * 1024
# PyYAML's composer recurses per nesting level; deeper documents are refused before Python's recursion limit.
MAX_NESTING = 64


@dataclass(frozen=True, slots=True)
class RuleDocument:
    rules: tuple[Rule, ...]
    sources: tuple[EventSource, ...]
    schemas: tuple[EventSchema, ...] = ()
    archives: tuple[Archive, ...] = ()


def parse_rule_file(path: str, text: str, *, compile_pattern: PatternCompileHook | None = None) -> tuple[Rule, ...]:
    """Parse and validate one rule file's text; `path` only names the file in positions and errors."""
    return parse_rule_document(path, text, compile_pattern=compile_pattern).rules


def parse_rule_document(path: str, text: str, *, compile_pattern: PatternCompileHook | None = None) -> RuleDocument:
    """Parse and validate one rule file's text: its rules, event sources, schemas and archives."""
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
    top = reader.mapping(root, "rule file", ["rules", "sources", "schemas", "archives"])
    if not top:
        raise reader.error(
            root, "rule file: write 'rules:', 'sources:', 'schemas:' or 'archives:' with a list, or delete the file"
        )
    sources = read_sources(reader, top["sources"][1]) if "sources" in top else ()
    schemas = read_schemas(reader, top["schemas"][1]) if "schemas" in top else ()
    archives = read_archives(reader, top["archives"][1], compile_pattern) if "archives" in top else ()
    if "rules" not in top:
        return RuleDocument((), sources, schemas, archives)
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
    return RuleDocument(tuple(rules), sources, schemas, archives)


def declared_rules(text: str) -> tuple[RuleKey, ...]:
    """The rules a file's text names (`name`, and `bus` or the default), read leniently and never raising: for a
    refused file, the rules it was meant to hold, so that asking for one of them can be answered with the file's
    error rather than "no such rule". Empty where the text is no YAML mapping with a `rules:` list."""
    if len(text) > MAX_RULE_FILE_CHARS or _max_flow_or_block_nesting(text) is not None:
        return ()
    try:
        root = yaml.compose(text, Loader=_LOADER)
    except yaml.YAMLError:
        return ()
    found = []
    rules = _value_of(root, "rules")
    for node in rules.value if isinstance(rules, SequenceNode) else []:
        name, bus = _value_of(node, "name"), _value_of(node, "bus")
        if isinstance(name, ScalarNode) and isinstance(name.value, str) and name.value:
            found.append(RuleKey(bus.value if isinstance(bus, ScalarNode) and bus.value else DEFAULT_BUS, name.value))
    return tuple(found)


def _value_of(node: Node | None, key: str) -> Node | None:
    """The value of `key` in a mapping node (the last, if it is given twice), or None."""
    if not isinstance(node, MappingNode):
        return None
    found = None
    for key_node, value_node in node.value:
        if isinstance(key_node, ScalarNode) and key_node.value == key:
            found = value_node
    return found


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

_RULE_KEYS = ("name", "bus", "description", "enabled", "pattern", "schedule", "targets")


def _read_rule(reader: NodeReader, node: Node, compile_pattern: PatternCompileHook | None) -> Rule:
    fields = reader.mapping(node, "rule", _RULE_KEYS, ["name", "targets"])
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

    if "pattern" not in fields and "schedule" not in fields:
        raise reader.error(node, f"{where}: give a 'pattern', a 'schedule' (rate(...) or cron(...)), or both")
    pattern = read_pattern(reader, fields["pattern"][1], where, compile_pattern) if "pattern" in fields else None
    schedule = _read_schedule(reader, where, fields["schedule"][1]) if "schedule" in fields else None

    target_nodes = reader.sequence(fields["targets"][1], f"{where}: targets")
    if not target_nodes:
        raise reader.error(fields["targets"][1], f"{where}: targets is empty; give at least one target")
    targets: list[Target] = []
    for target_node in target_nodes:
        target = read_target(reader, where, target_node, bus)
        if any(t.id == target.id for t in targets):
            raise reader.error(target_node, f"{where}: target id {target.id!r} is used twice")
        targets.append(target)
    return Rule(name, bus, pattern, tuple(targets), enabled, description, reader.position(node), schedule)


def _read_schedule(reader: NodeReader, where: str, node: Node) -> Schedule:
    """A schedule expression; a refusal points at the column of the part at fault when the scalar is written on
    one line as its text is (plain, or quoted without escapes), else at the scalar."""
    text = reader.string(node, f"{where}: schedule")
    try:
        return parse_schedule(text)
    except ScheduleError as exc:
        error = reader.error(node, f"{where}: schedule {text!r}: {exc.reason}")
        assert isinstance(node, ScalarNode)
        quote = 0 if node.style in (None, "") else 1
        written = node.end_mark.column - node.start_mark.column - 2 * quote
        if node.style in (None, "", "'", '"') and node.start_mark.line == node.end_mark.line and written == len(text):
            error = RuleFileError(reader.path, error.line, error.column + quote + exc.offset, error.reason)
        raise error from None
