"""What a connector plugin implements, and the records it exchanges with the runtime.

Connector configs are flat string maps, as in Kafka Connect (`{"name": "...", "connector.class": "file-sink",
"topics": "orders", "file": "/tmp/out.txt"}`); a plugin declares the keys it takes in a `ConfigDef`, and the
runtime parses and validates a config against it before anything starts. Keys every connector takes (name,
connector.class, tasks.max, errors.*) are in `COMMON_CONFIG` and need not be declared again.
"""

from __future__ import annotations

import abc
import enum
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar


class ConfigType(enum.Enum):
    STRING = "STRING"
    INT = "INT"
    LONG = "LONG"
    DOUBLE = "DOUBLE"
    BOOLEAN = "BOOLEAN"
    LIST = "LIST"  # comma-separated
    PASSWORD = "PASSWORD"  # a string never shown back by the REST API


class Importance(enum.Enum):
    HIGH = "HIGH"
    MEDIUM = "MEDIUM"
    LOW = "LOW"


_NO_DEFAULT: Any = object()


@dataclass(slots=True, frozen=True)
class ConfigKey:
    name: str
    type: ConfigType
    doc: str
    default: Any = _NO_DEFAULT  # no default: the key is required
    importance: Importance = Importance.MEDIUM
    # Raises ValueError with the reason when a parsed value is not acceptable (a range, a choice, a path).
    validator: Callable[[Any], None] | None = None

    @property
    def required(self) -> bool:
        return self.default is _NO_DEFAULT


@dataclass(slots=True, frozen=True)
class ConfigError:
    """One problem with a config: the key and why (what the REST API returns with HTTP 400)."""

    key: str
    message: str


@dataclass(slots=True)
class ConfigDef:
    keys: dict[str, ConfigKey] = field(default_factory=dict)

    def define(self, key: ConfigKey) -> ConfigDef:
        if key.name in self.keys:
            raise ValueError(f"config key {key.name!r} is defined twice")
        self.keys[key.name] = key
        return self

    def merged(self, other: ConfigDef) -> ConfigDef:
        merged = ConfigDef(dict(self.keys))
        for key in other.keys.values():
            merged.define(key)
        return merged

    def parse(self, config: Mapping[str, str]) -> tuple[dict[str, Any], list[ConfigError]]:
        """Typed values for every declared key (defaults filled in) and the errors found, one per bad key."""
        values: dict[str, Any] = {}
        errors: list[ConfigError] = []
        for key in self.keys.values():
            raw = config.get(key.name)
            if raw is None:
                if key.required:
                    errors.append(ConfigError(key.name, "missing required configuration"))
                else:
                    values[key.name] = key.default
                continue
            try:
                value = _parse_value(key.type, raw)
                if key.validator is not None:
                    key.validator(value)
            except ValueError as exc:
                errors.append(ConfigError(key.name, f"invalid value {raw!r}: {exc}"))
                continue
            values[key.name] = value
        return values, errors


def _parse_value(kind: ConfigType, raw: str) -> Any:
    if not isinstance(raw, str):
        raise ValueError(f"expected a string, got {type(raw).__name__}")
    text = raw.strip()
    if kind in (ConfigType.STRING, ConfigType.PASSWORD):
        return raw
    if kind in (ConfigType.INT, ConfigType.LONG):
        try:
            return int(text)
        except ValueError:
            raise ValueError("expected an integer") from None
    if kind is ConfigType.DOUBLE:
        try:
            return float(text)
        except ValueError:
            raise ValueError("expected a number") from None
    if kind is ConfigType.BOOLEAN:
        lowered = text.lower()
        if lowered not in ("true", "false"):
            raise ValueError("expected true or false")
        return lowered == "true"
    if kind is ConfigType.LIST:
        return [item.strip() for item in text.split(",") if item.strip()]
    raise ValueError(f"unknown config type {kind}")


def at_least(minimum: float) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value < minimum:
            raise ValueError(f"must be at least {minimum}")

    return check


def one_of(*choices: str) -> Callable[[Any], None]:
    def check(value: Any) -> None:
        if value not in choices:
            raise ValueError(f"must be one of {', '.join(choices)}")

    return check


# Keys every connector takes (Kafka Connect's names).
COMMON_CONFIG = (
    ConfigDef()
    .define(ConfigKey("name", ConfigType.STRING, "unique name of the connector", importance=Importance.HIGH))
    .define(ConfigKey("connector.class", ConfigType.STRING, "plugin name (see GET /connector-plugins)"))
    .define(
        ConfigKey(
            "tasks.max", ConfigType.INT, "the most tasks to split the connector into", 1, Importance.HIGH, at_least(1)
        )
    )
    .define(
        ConfigKey(
            "errors.tolerance",
            ConfigType.STRING,
            "none: a failing record fails the task; all: it goes to the dead-letter topic and the task goes on",
            "none",
            validator=one_of("none", "all"),
        )
    )
    .define(
        ConfigKey(
            "errors.retry.timeout",
            ConfigType.LONG,
            "ms to keep retrying a failing record (0: once)",
            0,
            validator=at_least(0),
        )
    )
    .define(
        ConfigKey(
            "errors.retry.delay.max.ms",
            ConfigType.LONG,
            "the longest wait between retries",
            60_000,
            validator=at_least(0),
        )
    )
    .define(
        ConfigKey(
            "errors.deadletterqueue.topic.name",
            ConfigType.STRING,
            "sinks, with errors.tolerance=all: the core topic a failing record is sent to (empty: it is skipped)",
            "",
        )
    )
    .define(
        ConfigKey(
            "errors.deadletterqueue.context.headers.enable",
            ConfigType.BOOLEAN,
            "a dead-lettered record carries the error, the connector and its origin in properties CONNECT_ERROR*"
            " (on by default, unlike Kafka Connect; false: the record's own properties only)",
            True,
        )
    )
    .define(
        ConfigKey(
            "errors.log.enable",
            ConfigType.BOOLEAN,
            "log each failing record (its origin and error) at ERROR, tolerated or not (false: only a task that"
            " fails is logged)",
            False,
        )
    )
    .define(
        ConfigKey(
            "errors.log.include.messages",
            ConfigType.BOOLEAN,
            "with errors.log.enable: the record's body and properties in the log line too",
            False,
        )
    )
)

# Properties the runtime sets on records (sources) and on dead-lettered records.
PROPERTY_TASK = "CONNECT_TASK"  # "<connector>/<task number>"
PROPERTY_PARTITION = "CONNECT_PARTITION"  # JSON of the source partition
PROPERTY_POSITION = "CONNECT_POSITION"  # JSON of the source position
PROPERTY_ERROR = "CONNECT_ERROR"  # dead-letter records: the exception, as text
PROPERTY_ERROR_CONNECTOR = "CONNECT_ERROR_CONNECTOR"
PROPERTY_ERROR_ORIGIN = "CONNECT_ERROR_ORIGIN"  # "<topic>/<queue id>/<queue offset>" of the failed record


@dataclass(slots=True, frozen=True)
class QueueRef:
    """A core queue a sink task reads: its topic, queue id and broker group. The runtime always names the group (on a
    cluster a task reads queues of every group, and moves between nodes); "" is a ref stored before groups were
    named (a sink's old offsets), which stands for the group of the node that wrote it: `in_group` names it."""

    topic: str
    queue_id: int
    broker: str = ""

    def in_group(self, group: str) -> QueueRef:
        """This ref, its group `group` when it names none."""
        return self if self.broker or not group else QueueRef(self.topic, self.queue_id, group)


@dataclass(slots=True)
class SinkRecord:
    topic: str
    queue_id: int
    queue_offset: int
    body: bytes
    keys: list[str]
    tags: str | None
    properties: dict[str, str]
    born_timestamp_ms: int
    store_timestamp_ms: int
    msg_id: str
    broker: str = ""  # the broker group whose queue holds it

    @property
    def queue(self) -> QueueRef:
        return QueueRef(self.topic, self.queue_id, self.broker)


@dataclass(slots=True)
class SourceRecord:
    """`partition` names a stream of the source (a file, a table) and `position` how far it has been read
    (an offset in that file): both JSON-serialisable; positions of one partition only grow."""

    partition: dict[str, Any]
    position: dict[str, Any]
    topic: str
    body: bytes
    keys: Sequence[str] = ()
    tags: str | None = None
    properties: dict[str, str] = field(default_factory=dict)


class RecordsFailed(Exception):
    """Raised by `SinkTask.put` when some of its records can never be written, however often they are retried (a
    poison record: a body the sink cannot parse). Every record of the call that is not listed was accepted, as if
    `put` had returned; putting an accepted record again is harmless (exactly-once sinks skip offsets they hold).
    The runtime handles each listed record as a failed record (retries, the dead-letter topic or a failed task,
    per `errors.tolerance`); `failures` pairs each record with its error, in queue order."""

    def __init__(self, failures: Sequence[tuple[SinkRecord, BaseException]]) -> None:
        self.failures = list(failures)
        record, error = self.failures[0]
        super().__init__(
            f"{len(self.failures)} record(s) cannot be written; the first, "
            f"{record.topic}/{record.queue_id}/{record.queue_offset}: {error}"
        )


class TaskContext:
    """What the runtime gives a task at start."""

    def __init__(
        self,
        connector: str,
        task: int,
        positions: Mapping[str, dict[str, Any]] | None = None,
        group: str = "",
        cluster: bool = False,
    ) -> None:
        """`group`: the broker group of the node running the task (what an offset stored without one stands for,
        QueueRef.in_group); `cluster`: the task runs on a cluster and may move between nodes (a sink holding a lock
        on its output waits for the previous node's to go)."""
        self.connector = connector
        self.task = task
        self._positions = dict(positions or {})
        self.group = group
        self.cluster = cluster

    def position(self, partition: dict[str, Any]) -> dict[str, Any] | None:
        """A source task's committed position of `partition` (None: read it from the start)."""
        return self._positions.get(partition_key(partition))


def partition_key(partition: Mapping[str, Any]) -> str:
    """The canonical JSON of a source partition (the key its position is stored under)."""
    return json.dumps(partition, sort_keys=True, separators=(",", ":"))


class Task:
    """Hooks every task has; SourceTask and SinkTask add the abstract methods."""

    async def start(self, config: dict[str, Any], context: TaskContext) -> None:
        """Called once before anything else, with the parsed task config."""

    async def stop(self) -> None:
        """Release what the task holds; called once, also after a failure."""


class SourceTask(Task):
    @abc.abstractmethod
    async def poll(self) -> list[SourceRecord]:
        """The next records (an empty list when there is nothing now; the runtime waits a little and polls again)."""


class SinkTask(Task):
    @abc.abstractmethod
    async def put(self, records: list[SinkRecord]) -> None:
        """Write the records (in queue order per queue); raise to have the runtime retry or dead-letter them, or raise
        `RecordsFailed` naming the records that failed when the others were accepted."""

    async def flush(self, offsets: dict[QueueRef, int]) -> None:
        """Make everything `put` so far durable; `offsets` (next offset to read, per queue) are committed to the core
        after this returns. A sink that stores offsets with its data does so here, atomically with the data."""

    async def stored_offsets(self, queues: Sequence[QueueRef]) -> dict[QueueRef, int]:
        """The next offset to read per queue as the sink's own storage records it (exactly-once sinks); the runtime
        resumes there instead of at the core's committed offset. Default: none (at least once)."""
        return {}


class Connector(abc.ABC):
    """A plugin: validates its config and splits it into task configs."""

    kind: ClassVar[str]  # "source" or "sink"
    config_def: ClassVar[ConfigDef]
    version: ClassVar[str] = "1.0"

    def validate(self, values: dict[str, Any]) -> list[ConfigError]:
        """Checks across keys, after each key was parsed and validated alone."""
        return []

    def task_configs(self, values: dict[str, Any], max_tasks: int) -> list[dict[str, Any]]:
        """One config per task (at most `max_tasks`). Default: one task with the connector's config."""
        return [dict(values)]

    @abc.abstractmethod
    def task(self) -> Task:
        """A new task instance."""
