"""The EventBridge rule model: rules, their HTTP targets, event sources, schemas and archives, and where each was
written; rule sets and their diff.

Records are frozen. Equality is content: where a rule was written (file, line) is not part of it, so a rule moved
within or across files is the same rule, and reloading does not restart its consumers (`diff_rule_sets`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from eventbridge.event_form import canonical_json
from eventbridge.json_path import JsonPath
from eventbridge.schedules.expression import Schedule
from eventbridge.targets.retry_policy import BackoffRetry, RetryPolicy
from eventbridge.targets.transform import Transform, TransformSpec, compile_transform

# The MQTT gateway's topic mapping: pure, shared with the gateway so that a source reads where messages are stored.
from mqtt_bridge.topics.topic_mapping import core_topic_of

DEFAULT_BUS = "default"
DEFAULT_TIMEOUT_MS = 5_000  # AWS API destinations: 5 s
MAX_TIMEOUT_MS = 300_000
DEFAULT_CONCURRENCY = 8
MAX_CONCURRENCY = 1_024


class TargetMode(enum.Enum):
    BINARY = "binary"
    STRUCTURED = "structured"


@dataclass(frozen=True, slots=True)
class SourcePosition:
    path: str
    line: int  # 1-based
    column: int  # 1-based

    def __str__(self) -> str:
        return f"{self.path}:{self.line}:{self.column}"


@dataclass(frozen=True, slots=True)
class RulePattern:
    """A rule's filter pattern as parsed JSON, with where it was written (for the compiler's error messages).

    Patterns compare by their canonical JSON text, not by Python equality, under which `true == 1` and
    `1 == 1.0`: a pattern edited from `[true]` to `[1]` matches other events and must count as changed.
    """

    value: Mapping[str, Any] = field(compare=False)
    position: SourcePosition = field(compare=False)
    canonical: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "canonical", canonical_json(self.value))


@dataclass(frozen=True, slots=True)
class BasicAuth:
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class ApiKeyAuth:
    header: str
    value: str = field(repr=False)


@dataclass(frozen=True, slots=True)
class HttpTarget:
    id: str
    url: str
    mode: TargetMode = TargetMode.BINARY
    headers: tuple[tuple[str, str], ...] = ()  # static, in file order
    derived_headers: tuple[tuple[str, JsonPath], ...] = ()  # from the event by JSONPath
    timeout_ms: int = DEFAULT_TIMEOUT_MS
    concurrency: int = DEFAULT_CONCURRENCY
    auth: BasicAuth | ApiKeyAuth | None = None
    transform: Transform = field(default_factory=lambda: compile_transform(TransformSpec()))
    retry_policy: RetryPolicy = field(default_factory=BackoffRetry)
    dead_letter_topic: str | None = None
    position: SourcePosition | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class TopicTarget:
    """A core topic: each event becomes one message (CloudEvents' Kafka binding: the data as the body, attributes as
    `ce_*` properties, in binary mode; the whole CloudEvent JSON in structured mode), keyed by the event id."""

    id: str
    topic: str
    mode: TargetMode = TargetMode.BINARY
    tag: str | None = None  # the message's tag; None: the event's type
    transform: Transform = field(default_factory=lambda: compile_transform(TransformSpec()))
    retry_policy: RetryPolicy = field(default_factory=BackoffRetry)
    dead_letter_topic: str | None = None
    position: SourcePosition | None = field(default=None, compare=False)
    # Stored one after another, in the order the events were routed (a local store takes microseconds an event).
    concurrency: int = field(default=1, init=False)


@dataclass(frozen=True, slots=True)
class MqttTopicTemplate:
    """An MQTT topic name in which `${<JSONPath>}` stands for a value of the event (as AWS IoT's substitution
    templates do): `devices/${$.data.device}/commands`. `parts` alternate literal text and paths."""

    text: str
    parts: tuple[str | JsonPath, ...] = field(compare=False)


@dataclass(frozen=True, slots=True)
class MqttTarget:
    """An MQTT topic: each event is published by the gateway, as a client's PUBLISH would be (retained when
    `retain`), to the devices subscribed (CloudEvents' MQTT binding: in binary mode the data as the payload and the
    attributes as MQTT 5 user properties; in structured mode the whole CloudEvent JSON)."""

    id: str
    topic: MqttTopicTemplate
    qos: int = 0
    retain: bool = False
    mode: TargetMode = TargetMode.BINARY
    transform: Transform = field(default_factory=lambda: compile_transform(TransformSpec()))
    retry_policy: RetryPolicy = field(default_factory=BackoffRetry)
    dead_letter_topic: str | None = None
    position: SourcePosition | None = field(default=None, compare=False)
    # In order: a device sees its commands in the order the events were routed.
    concurrency: int = field(default=1, init=False)


@dataclass(frozen=True, slots=True)
class BusTarget:
    """Another bus: each event is put on it unchanged (same id, as AWS forwards events between buses), where that
    bus's rules route it."""

    id: str
    bus: str
    retry_policy: RetryPolicy = field(default_factory=BackoffRetry)
    dead_letter_topic: str | None = None
    position: SourcePosition | None = field(default=None, compare=False)
    concurrency: int = field(default=1, init=False)


Target = HttpTarget | TopicTarget | MqttTarget | BusTarget


@dataclass(frozen=True, slots=True)
class RuleKey:
    bus: str
    name: str

    def __str__(self) -> str:
        return f"{self.bus}/{self.name}"


@dataclass(frozen=True, slots=True)
class Rule:
    """As AWS PutRule: a pattern, a schedule, or both. A rule without a pattern is matched by no event; it receives
    only the events its schedule puts on its bus for it (schedules/scheduler.py)."""

    name: str
    bus: str
    pattern: RulePattern | None
    targets: tuple[Target, ...]
    enabled: bool = True
    description: str = ""
    position: SourcePosition | None = field(default=None, compare=False)
    schedule: Schedule | None = None

    @property
    def key(self) -> RuleKey:
        return RuleKey(self.bus, self.name)


# What an event source gives its events as `type` when the file does not say.
DEFAULT_MQTT_EVENT_TYPE = "mqgate.mqtt.message"
DEFAULT_TOPIC_EVENT_TYPE = "mqgate.message"


@dataclass(frozen=True, slots=True)
class EventSource:
    """Messages of the core that become events on a bus: those of an MQTT topic filter (`mqtt`), or all those of a
    core topic (`topic`); exactly one of the two is set. An MQTT filter's first level names the core topic read,
    through the gateway's mapping (mqtt_bridge/topics/topic_mapping.py: `sensors/+` reads `sensors`, `/x/#` reads
    `%MQTT%`)."""

    name: str
    bus: str
    type: str
    mqtt: str | None = None
    topic: str | None = None
    enabled: bool = True
    position: SourcePosition | None = field(default=None, compare=False)

    @property
    def core_topic(self) -> str:
        if self.mqtt is not None:
            return core_topic_of(self.mqtt)
        assert self.topic is not None
        return self.topic


@dataclass(frozen=True, slots=True)
class EventSchema:
    """A JSON Schema that the data of events from `source` (exact, or a prefix ending in '*') of `type` must meet."""

    source: str
    type: str
    schema: Mapping[str, Any] = field(compare=False)
    position: SourcePosition | None = field(default=None, compare=False)
    canonical: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "canonical", canonical_json(self.schema))


# AWS RetentionDays is an integer, 0 meaning "indefinitely", with no stated upper bound; a thousand years keeps the
# arithmetic in milliseconds far inside 64 bits while refusing a misplaced unit (seconds typed as days).
MAX_RETENTION_DAYS = 365_000


@dataclass(frozen=True, slots=True)
class Archive:
    """An archive of a bus's events (AWS EventBridge CreateArchive): every event put on `bus` from its creation on
    that matches `pattern` (all of them when there is none), kept `retention_days` after it reached the bus (0:
    indefinitely). Names are unique across buses, as ArchiveName is per account and region."""

    name: str
    bus: str = DEFAULT_BUS
    pattern: RulePattern | None = None
    retention_days: int = 0
    description: str = ""
    position: SourcePosition | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class RuleSet:
    """The rules, event sources, schemas and archives in force, rules by (bus, name), sources and archives by name,
    with the file each came from."""

    rules: Mapping[RuleKey, Rule] = field(default_factory=dict)
    sources: Mapping[str, EventSource] = field(default_factory=dict)
    schemas: tuple[EventSchema, ...] = ()
    archives: Mapping[str, Archive] = field(default_factory=dict)

    def __iter__(self) -> Iterator[Rule]:
        return iter(self.rules.values())

    def __len__(self) -> int:
        return len(self.rules)

    def __contains__(self, key: object) -> bool:
        return key in self.rules

    def get(self, key: RuleKey) -> Rule | None:
        return self.rules.get(key)

    def from_file(self, path: str) -> list[Rule]:
        return [rule for rule in self.rules.values() if rule.position is not None and rule.position.path == path]

    def sources_from_file(self, path: str) -> list[EventSource]:
        return [s for s in self.sources.values() if s.position is not None and s.position.path == path]

    def schemas_from_file(self, path: str) -> list[EventSchema]:
        return [s for s in self.schemas if s.position is not None and s.position.path == path]

    def archives_from_file(self, path: str) -> list[Archive]:
        return [a for a in self.archives.values() if a.position is not None and a.position.path == path]


@dataclass(frozen=True, slots=True)
class RuleSetDiff:
    """What a reload changed. Unchanged rules keep running: their consumers must not be restarted."""

    added: tuple[Rule, ...]
    removed: tuple[Rule, ...]
    changed: tuple[tuple[Rule, Rule], ...]  # (old, new)
    unchanged: tuple[Rule, ...]


def diff_rule_sets(old: RuleSet, new: RuleSet) -> RuleSetDiff:
    """Compare by (bus, name) and then by content; where a rule was written (file, line) is not content."""
    added = tuple(rule for key, rule in new.rules.items() if key not in old.rules)
    removed = tuple(rule for key, rule in old.rules.items() if key not in new.rules)
    changed: list[tuple[Rule, Rule]] = []
    unchanged: list[Rule] = []
    for key, rule in new.rules.items():
        before = old.rules.get(key)
        if before is None:
            continue
        if before == rule:
            unchanged.append(before)
        else:
            changed.append((before, rule))
    return RuleSetDiff(added, removed, tuple(changed), tuple(unchanged))
