"""The standalone worker: every connector of this `mqgate serve`, its tasks and their states.

Connectors come from two places, both kept in the core table `connect-configs` (config_table.py):
- the REST API (`create`, `put_config`, `delete`, `pause`, `resume`);
- config files `CONFIG_DIR/*.json|*.yaml` (by default `DATA_DIR/connectors`, beside the worker's data dir
  `DATA_DIR/connect`): each holds one flat config, its `name` defaulting to the file's stem. At start a file's
  connector is (re)created from the file, so an edit of the file wins over changes made through the API since;
  a connector deleted through the API comes back at the next start while its file is there.

A sink connector's queues (all read queues of its `topics`, sorted) are split over its tasks round robin. A
connector that cannot start (unknown plugin, bad config, `task_configs` raising) is FAILED with the trace in
its status; a task that fails is FAILED alone, until `restart`.
"""

from __future__ import annotations

import asyncio
import logging
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connectors import api
from connectors.config_file import CONFIG_FILE_SUFFIXES, read_config_file, render_value
from connectors.config_table import ConfigTable, StoredConfig
from connectors.errors import AlreadyExists, InvalidConfig, NotFound
from connectors.plugins import PluginRegistry
from connectors.position_table import PositionTable
from connectors.sink_runner import SinkRunner
from connectors.source_runner import SourceRunner
from connectors.task_runner import Arrivals, State, TaskRunner
from connectors.validation import validate_config
from core import Broker, MessageQueue

log = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True)
class TaskId:
    connector: str
    task: int


@dataclass(slots=True, frozen=True)
class ConnectorInfo:
    name: str
    config: dict[str, str]
    tasks: list[TaskId]
    type: str  # "source" or "sink" ("unknown" when the plugin is not installed)


@dataclass(slots=True, frozen=True)
class StateInfo:
    state: str  # "RUNNING", "PAUSED", "FAILED" or "UNASSIGNED"
    worker_id: str
    trace: str | None = None


@dataclass(slots=True, frozen=True)
class TaskState:
    id: int
    state: str
    worker_id: str
    trace: str | None = None


@dataclass(slots=True, frozen=True)
class ConnectorStatus:
    name: str
    type: str
    connector: StateInfo
    tasks: list[TaskState]


@dataclass(slots=True)
class _Connector:
    name: str
    config: dict[str, str]
    paused: bool
    type: str = "unknown"
    state: State = State.UNASSIGNED
    trace: str | None = None
    task_configs: list[dict[str, Any]] = field(default_factory=list)
    runners: list[TaskRunner] = field(default_factory=list)


class Worker:
    def __init__(
        self,
        broker: Broker,
        data_dir: Path,
        plugins: PluginRegistry,
        worker_id: str = "mqgate",
        config_dir: Path | None = None,
    ) -> None:
        self.broker = broker
        self.data_dir = Path(data_dir)
        self.config_dir = Path(config_dir) if config_dir is not None else self.data_dir.parent / "connectors"
        self.plugins = plugins
        self.worker_id = worker_id
        self._configs = ConfigTable(broker, self.data_dir / "configs.json")
        self._positions = PositionTable(broker, self.data_dir / "offsets.json")
        self._arrivals = Arrivals()
        self._connectors: dict[str, _Connector] = {}
        # Changes of one connector run one at a time (a restart racing a delete would start orphan tasks).
        self._lock = asyncio.Lock()

    # --- life cycle ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        await self._configs.load()
        await self._positions.load()
        self.broker.add_arrival_listener(self._arrivals.notify)
        for path in sorted(self.config_dir.glob("*")) if self.config_dir.is_dir() else []:
            if path.suffix not in CONFIG_FILE_SUFFIXES:
                continue
            try:
                config = read_config_file(path)
            except (OSError, ValueError) as exc:
                log.error("connector file %s left out: %s", path, exc)
                continue
            name = config["name"]
            stored = self._configs.entries.get(name)
            if stored is None or stored.config != config:
                await self._configs.put(name, StoredConfig(config, stored.paused if stored else False))
                log.info("connector %r (re)created from %s", name, path)
        for name, stored in sorted(self._configs.entries.items()):
            await self._start_connector(name, stored)
        log.info("connector worker %s: %d connectors", self.worker_id, len(self._connectors))

    async def close(self) -> None:
        async with self._lock:
            for connector in self._connectors.values():
                await self._stop_tasks(connector)
            self._connectors.clear()
            await self._arrivals.close()
        await self._positions.close()
        await self._configs.close()

    # --- reading -------------------------------------------------------------------------------------------

    def connectors(self) -> list[str]:
        return sorted(self._connectors)

    def _get(self, name: str) -> _Connector:
        connector = self._connectors.get(name)
        if connector is None:
            raise NotFound(name)
        return connector

    def info(self, name: str) -> ConnectorInfo:
        connector = self._get(name)
        tasks = [TaskId(name, number) for number in range(len(connector.task_configs))]
        return ConnectorInfo(name, dict(connector.config), tasks, connector.type)

    def status(self, name: str) -> ConnectorStatus:
        connector = self._get(name)
        tasks = [
            TaskState(runner.task_id, runner.state.value, self.worker_id, runner.trace) for runner in connector.runners
        ]
        return ConnectorStatus(
            name, connector.type, StateInfo(connector.state.value, self.worker_id, connector.trace), tasks
        )

    def task_configs(self, name: str) -> list[dict[str, str]]:
        return [{key: render_value(value) for key, value in config.items()} for config in self._get(name).task_configs]

    def runner(self, name: str, task: int) -> TaskRunner:
        """The runner of a task (tests and diagnostics)."""
        return self._get(name).runners[task]

    # --- changing ------------------------------------------------------------------------------------------

    def _checked(self, name: str, config: Mapping[str, str]) -> dict[str, str]:
        config = dict(config)
        if config.setdefault("name", name) != name:
            raise InvalidConfig(
                name, [api.ConfigError("name", f"{config['name']!r} differs from the connector's name {name!r}")]
            )
        errors = validate_config(self.plugins, config)
        if errors:
            raise InvalidConfig(name, errors)
        return config

    async def create(self, name: str, config: dict[str, str]) -> ConnectorInfo:
        async with self._lock:
            if name in self._connectors:
                raise AlreadyExists(name)
            checked = self._checked(name, config)
            stored = StoredConfig(checked)
            await self._configs.put(name, stored)
            await self._start_connector(name, stored)
        log.info("connector %r created", name)
        return self.info(name)

    async def put_config(self, name: str, config: dict[str, str]) -> tuple[ConnectorInfo, bool]:
        async with self._lock:
            checked = self._checked(name, config)
            old = self._connectors.get(name)
            if old is not None:
                await self._stop_tasks(old)
            stored = StoredConfig(checked, old.paused if old is not None else False)
            await self._configs.put(name, stored)
            await self._start_connector(name, stored)
        log.info("connector %r %s", name, "created" if old is None else "reconfigured")
        return self.info(name), old is None

    async def delete(self, name: str) -> None:
        async with self._lock:
            connector = self._get(name)
            await self._stop_tasks(connector)
            del self._connectors[name]
            await self._configs.put(name, None)
        log.info("connector %r deleted", name)

    async def pause(self, name: str) -> None:
        async with self._lock:
            connector = self._get(name)
            if not connector.paused:
                connector.paused = True
                await self._configs.put(name, StoredConfig(connector.config, True))
            if connector.state is not State.FAILED:
                connector.state = State.PAUSED
            for runner in connector.runners:
                await runner.pause()

    async def resume(self, name: str) -> None:
        async with self._lock:
            connector = self._get(name)
            if connector.paused:
                connector.paused = False
                await self._configs.put(name, StoredConfig(connector.config, False))
            if connector.state is not State.FAILED:
                connector.state = State.RUNNING
            for runner in connector.runners:
                runner.resume()

    async def restart(self, name: str, include_tasks: bool = False, only_failed: bool = False) -> None:
        """Restart the connector (only if FAILED when `only_failed`) and, with `include_tasks`, its tasks (only the
        FAILED ones when `only_failed`). A FAILED connector is rebuilt from its config, tasks and all."""
        async with self._lock:
            connector = self._get(name)
            if connector.state is State.FAILED:
                await self._stop_tasks(connector)
                await self._start_connector(name, StoredConfig(connector.config, connector.paused))
                return
            if not include_tasks:
                return
            for number, runner in enumerate(connector.runners):
                if only_failed and runner.state is not State.FAILED:
                    continue
                await runner.stop()
                connector.runners[number] = self._runner(connector, number)
                connector.runners[number].start()
            log.info("connector %r: tasks restarted", name)

    # --- internals -----------------------------------------------------------------------------------------

    async def _start_connector(self, name: str, stored: StoredConfig) -> None:
        connector = _Connector(name, dict(stored.config), stored.paused)
        self._connectors[name] = connector
        try:
            plugin = self.plugins.get(connector.config.get("connector.class", ""))
            connector.type = plugin.kind
            errors = validate_config(self.plugins, connector.config)
            if errors:
                raise InvalidConfig(name, errors)
            values, _ = api.COMMON_CONFIG.merged(plugin.config_def).parse(connector.config)
            # Keys no definition declares are passed on as strings (a plugin may read them).
            values = {**connector.config, **values}
            max_tasks = int(values["tasks.max"])
            task_configs = plugin().task_configs(values, max_tasks)[:max_tasks]
            connector.task_configs = [{**values, **config} for config in task_configs]
            connector.runners = [self._runner(connector, number) for number in range(len(task_configs))]
        except Exception:
            connector.state = State.FAILED
            connector.trace = traceback.format_exc()
            connector.runners = []
            log.error("connector %r failed to start:\n%s", name, connector.trace)
            return
        connector.state = State.PAUSED if connector.paused else State.RUNNING
        for runner in connector.runners:
            runner.start()

    def _runner(self, connector: _Connector, number: int) -> TaskRunner:
        plugin = self.plugins.get(connector.config["connector.class"])
        config = connector.task_configs[number]
        task = plugin().task()
        if plugin.kind == "source":
            assert isinstance(task, api.SourceTask), f"{plugin.__qualname__}.task() is not a SourceTask"
            return SourceRunner(self.broker, self._positions, connector.name, number, task, config, connector.paused)
        assert isinstance(task, api.SinkTask), f"{plugin.__qualname__}.task() is not a SinkTask"
        queues = self._sink_queues(config)
        share = queues[number :: len(connector.task_configs)]
        return SinkRunner(self.broker, self._arrivals, connector.name, number, task, config, share, connector.paused)

    def _sink_queues(self, config: dict[str, Any]) -> list[MessageQueue]:
        topics = config.get("topics")
        if isinstance(topics, str):
            topics = [topic.strip() for topic in topics.split(",") if topic.strip()]
        if not topics:
            raise ValueError("a sink connector needs 'topics': the topics it reads")
        queues = []
        for topic in topics:
            queues += self.broker.route(topic).read_queues  # auto-creates the topic when the broker allows it
        return sorted(queues, key=lambda queue: (queue.topic, queue.queue_id))

    async def _stop_tasks(self, connector: _Connector) -> None:
        for runner in connector.runners:
            await runner.stop()
