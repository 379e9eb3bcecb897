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

On a cluster (cluster.py, `cluster` given) the configs are the cluster's shared table, each task runs on its owner's
node only (the others hold it as running there, `worker_id` naming the owner's broker group), a sink's queues are
its topics' on every live group, and tasks move when the live groups change (`_moved`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import traceback
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connectors import api
from connectors.cluster import ConnectCluster, task_work
from connectors.config_file import CONFIG_FILE_SUFFIXES, read_config_file, render_value
from connectors.config_table import ConfigTable, StoredConfig
from connectors.errors import AlreadyExists, InvalidConfig, NotFound
from connectors.plugins import PluginRegistry
from connectors.position_table import PositionTable
from connectors.sink_runner import SinkRunner, sink_group
from connectors.source_runner import SourceRunner
from connectors.task_runner import Arrivals, State, TaskRunner
from connectors.validation import validate_config
from core import Broker, MessageQueue
from peers.owners import HANDOVER_S

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
    # By task number; None for a task that runs on another node (on a cluster), or waits for its handover here.
    runners: list[TaskRunner | None] = field(default_factory=list)
    # A sink's queues, sorted, split over its tasks round robin.
    queues: list[MessageQueue] = field(default_factory=list)


class Worker:
    def __init__(
        self,
        broker: Broker,
        data_dir: Path,
        plugins: PluginRegistry,
        worker_id: str = "mqgate",
        config_dir: Path | None = None,
        cluster: ConnectCluster | None = None,
    ) -> None:
        """`cluster`: joined (its `join` done) before `start`; the worker's id is then its broker group."""
        self.broker = broker
        self.data_dir = Path(data_dir)
        self.config_dir = Path(config_dir) if config_dir is not None else self.data_dir.parent / "connectors"
        self.plugins = plugins
        self.cluster = cluster
        self.worker_id = cluster.group if cluster is not None else worker_id
        self._configs = ConfigTable(broker, self.data_dir / "configs.json")
        shared_positions = cluster.positions if cluster is not None else None
        self._positions = PositionTable(broker, self.data_dir / "offsets.json", shared_positions)
        self._arrivals = Arrivals()
        self._connectors: dict[str, _Connector] = {}
        # Changes of one connector run one at a time (a restart racing a delete would start orphan tasks).
        self._lock = asyncio.Lock()
        # On a cluster, tasks gained are started from then on (HANDOVER_S after the live groups changed).
        self._hold_until = 0.0
        self._background: set[asyncio.Task[None]] = set()
        # On a cluster, the read queues of each sink topic seen on any group since this node started.
        self._known_queues: dict[str, set[MessageQueue]] = {}
        self._starting_later: asyncio.Task[None] | None = None

    # --- life cycle ----------------------------------------------------------------------------------------

    async def start(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        await self._configs.load()
        await self._positions.load()
        self.broker.add_arrival_listener(self._arrivals.notify)
        if self.cluster is not None:
            # A task this node owns may have run on another node until this one started.
            self._hold_until = asyncio.get_running_loop().time() + HANDOVER_S
            self.cluster.live.changed = self._moved
            self.cluster.configs.changed = self._changed_elsewhere
            known = self.cluster.configs.known()
            for name, stored in sorted(self._configs.entries.items()):
                # Connectors of this node the cluster never heard of (it ran alone before) become the cluster's.
                if name not in known:
                    await self.cluster.configs.put(name, stored.to_json())
            known = self.cluster.positions.known()
            for key, committed in sorted(self._positions.table.entries.items()):
                if key not in known:  # named with this group: another node reading it must know whose queue it is
                    named = dataclasses.replace(committed, group=committed.group or self.broker.config.broker_name)
                    await self.cluster.positions.put(key, named.to_json())
        for path in sorted(self.config_dir.glob("*")) if self.config_dir.is_dir() else []:
            if path.suffix not in CONFIG_FILE_SUFFIXES:
                continue
            try:
                config = read_config_file(path)
            except (OSError, ValueError) as exc:
                log.error("connector file %s left out: %s", path, exc)
                continue
            name = config["name"]
            current = self._entries().get(name)
            if current is None or current.config != config:
                await self._store(name, StoredConfig(config, current.paused if current else False))
                log.info("connector %r (re)created from %s", name, path)
        async with self._lock:
            for name, stored in sorted(self._entries().items()):
                await self._start_connector(name, stored)
        log.info("connector worker %s: %d connectors", self.worker_id, len(self._connectors))

    async def close(self) -> None:
        for task in [*self._background, self._starting_later]:
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
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

    def task_owner(self, name: str, task: int) -> str:
        """The worker (on a cluster: the broker group) that runs the task."""
        if self.cluster is None:
            return self.worker_id
        return self.cluster.owner(task_work(name, task))

    def status(self, name: str) -> ConnectorStatus:
        connector = self._get(name)
        tasks = []
        for number, runner in enumerate(connector.runners):
            if runner is not None:
                tasks.append(TaskState(number, runner.state.value, self.worker_id, runner.trace))
                continue
            owner = self.task_owner(name, number)
            # Here: gained, waiting for its handover. Elsewhere: as its owner runs it by the shared config (its
            # trace, if it failed, is in that node's status).
            elsewhere = State.PAUSED if connector.paused else State.RUNNING
            state = State.UNASSIGNED if owner == self.worker_id else elsewhere
            tasks.append(TaskState(number, state.value, owner, None))
        # The connector itself (its task configs) is computed on every node; it is shown on task 0's owner, as Kafka
        # Connect shows it on the one worker that runs it.
        owner = self.task_owner(name, 0)
        return ConnectorStatus(name, connector.type, StateInfo(connector.state.value, owner, connector.trace), tasks)

    def running_tasks(self) -> int:
        """Tasks running (or paused) on this node."""
        return sum(
            1
            for connector in self._connectors.values()
            for runner in connector.runners
            if runner is not None and runner.state is not State.FAILED
        )

    def task_configs(self, name: str) -> list[dict[str, str]]:
        return [{key: render_value(value) for key, value in config.items()} for config in self._get(name).task_configs]

    def runner(self, name: str, task: int) -> TaskRunner:
        """The runner of a task running here (tests and diagnostics)."""
        runner = self._get(name).runners[task]
        if runner is None:
            raise NotFound(f"{name} task {task} (runs on {self.task_owner(name, task)})")
        return runner

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

    def _entries(self) -> dict[str, StoredConfig]:
        """Every connector's stored config: the cluster's shared table, or this node's."""
        if self.cluster is None:
            return dict(self._configs.entries)
        entries = {}
        for name, value in self.cluster.configs.entries().items():
            try:
                entries[name] = StoredConfig.from_json(value)
            except ValueError as exc:
                log.error("connector %r: its shared config is not one (%s); left out", name, exc)
        return entries

    async def _store(self, name: str, stored: StoredConfig | None) -> None:
        """Keep the config (None: deleted) here and, on a cluster, on every other node before this returns."""
        await self._configs.put(name, stored)
        if self.cluster is not None:
            failed = await self.cluster.configs.put(name, stored.to_json() if stored is not None else None)
            if failed:
                log.warning("connector %r: broker group(s) %s not told yet; told again until they are",
                            name, ", ".join(failed))  # fmt: skip

    async def create(self, name: str, config: dict[str, str]) -> ConnectorInfo:
        async with self._lock:
            if name in self._connectors:
                raise AlreadyExists(name)
            checked = self._checked(name, config)
            stored = StoredConfig(checked)
            await self._store(name, stored)
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
            await self._store(name, stored)
            await self._start_connector(name, stored)
        log.info("connector %r %s", name, "created" if old is None else "reconfigured")
        return self.info(name), old is None

    async def delete(self, name: str) -> None:
        async with self._lock:
            connector = self._get(name)
            await self._stop_tasks(connector)
            del self._connectors[name]
            await self._store(name, None)
        log.info("connector %r deleted", name)

    async def pause(self, name: str) -> None:
        async with self._lock:
            connector = self._get(name)
            if not connector.paused:
                await self._store(name, StoredConfig(connector.config, True))
            await self._pause(connector)

    async def _pause(self, connector: _Connector) -> None:
        connector.paused = True
        if connector.state is not State.FAILED:
            connector.state = State.PAUSED
        for runner in connector.runners:
            if runner is not None:
                await runner.pause()

    async def resume(self, name: str) -> None:
        async with self._lock:
            connector = self._get(name)
            if connector.paused:
                await self._store(name, StoredConfig(connector.config, False))
            self._resume(connector)

    def _resume(self, connector: _Connector) -> None:
        connector.paused = False
        if connector.state is not State.FAILED:
            connector.state = State.RUNNING
        for runner in connector.runners:
            if runner is not None:
                runner.resume()

    async def restart(self, name: str, include_tasks: bool = False, only_failed: bool = False) -> None:
        """Restart the connector (only if FAILED when `only_failed`) and, with `include_tasks`, its tasks (only the
        FAILED ones when `only_failed`). A FAILED connector is rebuilt from its config, tasks and all. On a cluster,
        the tasks restarted are those running on this node."""
        async with self._lock:
            connector = self._get(name)
            if connector.state is State.FAILED:
                await self._stop_tasks(connector)
                await self._start_connector(name, StoredConfig(connector.config, connector.paused))
                return
            if not include_tasks:
                return
            for number, runner in enumerate(connector.runners):
                if runner is None or (only_failed and runner.state is not State.FAILED):
                    continue
                await runner.stop()
                connector.runners[number] = self._runner(connector, number)
                connector.runners[number].start()  # type: ignore[union-attr]
            log.info("connector %r: tasks restarted", name)

    # --- the cluster's changes -----------------------------------------------------------------------------

    def _spawn(self, coroutine: Coroutine[Any, Any, None], name: str) -> None:
        task = asyncio.get_running_loop().create_task(coroutine, name=name)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    def _changed_elsewhere(self, name: str, value: Any) -> None:
        """Another node wrote a connector's config (the shared table, as its record is stored here)."""
        # asyncio.Lock wakes its waiters in order, so changes apply in the order they were heard.
        self._spawn(self._apply_elsewhere(name, value), f"connector {name} changed elsewhere")

    async def _apply_elsewhere(self, name: str, value: Any) -> None:
        stored = None
        if value is not None:
            try:
                stored = StoredConfig.from_json(value)
            except ValueError as exc:
                log.error("connector %r: its shared config is not one (%s); left as it was", name, exc)
                return
        async with self._lock:
            await self._configs.put(name, stored)
            old = self._connectors.get(name)
            if stored is None:
                if old is not None:
                    await self._stop_tasks(old)
                    del self._connectors[name]
                    log.info("connector %r deleted on another node", name)
                return
            if old is not None and old.config == stored.config:
                if stored.paused and not old.paused:
                    await self._pause(old)
                elif old.paused and not stored.paused:
                    self._resume(old)
                return
            if old is not None:
                await self._stop_tasks(old)
            await self._start_connector(name, stored)
            log.info("connector %r %s on another node", name, "created" if old is None else "reconfigured")

    def _moved(self) -> None:
        """The live groups changed (cluster.py): stop at once the tasks another node runs now (and those whose
        queues changed); start what this node gained after HANDOVER_S."""
        self._hold_until = asyncio.get_running_loop().time() + HANDOVER_S
        self._spawn(self._move(), "connector tasks moving")

    async def _move(self) -> None:
        async with self._lock:
            for connector in list(self._connectors.values()):
                if connector.state is State.FAILED:
                    continue
                if connector.type == "sink":
                    try:
                        connector.queues = await self._sink_queues(connector.task_configs[0])
                    except Exception as exc:
                        log.warning("connector %r: queues not known again (%s); kept as they were", connector.name, exc)
                count = len(connector.runners)
                for number, runner in enumerate(connector.runners):
                    if runner is None:
                        continue
                    owner = self.task_owner(connector.name, number)
                    moved = owner != self.worker_id
                    if not moved and isinstance(runner, SinkRunner):
                        moved = set(runner.queues) != set(connector.queues[number::count])
                    if moved:
                        await runner.stop()
                        connector.runners[number] = None
                        log.info("%s stopped: %s", runner.label,
                                 f"broker group {owner} runs it now" if owner != self.worker_id
                                 else "its queues changed")  # fmt: skip
            self._start_owned()

    def _start_owned(self) -> None:
        """Start the tasks this node runs that are not running (on a cluster, those gained only once the hold after
        a change of the live groups is over: later, by a task, if it is not)."""
        loop = asyncio.get_running_loop()
        held = False
        for connector in self._connectors.values():
            if connector.state is State.FAILED:
                continue
            for number, runner in enumerate(connector.runners):
                if runner is not None or self.task_owner(connector.name, number) != self.worker_id:
                    continue
                if loop.time() < self._hold_until:
                    held = True
                    continue
                try:
                    started = self._runner(connector, number)
                except Exception:
                    log.exception("connector %r task %d not started", connector.name, number)
                    continue
                connector.runners[number] = started
                started.start()
                log.info("%s started on broker group %s", started.label, self.worker_id)
        if held and (self._starting_later is None or self._starting_later.done()):
            self._starting_later = loop.create_task(self._start_later(), name="connector tasks gained")

    async def _start_later(self) -> None:
        await asyncio.sleep(max(0.0, self._hold_until - asyncio.get_running_loop().time()))
        async with self._lock:
            self._start_owned()

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
            if plugin.kind == "sink" and connector.task_configs:
                connector.queues = await self._sink_queues(connector.task_configs[0])
            connector.runners = [None] * len(task_configs)
            if self.cluster is None:
                connector.runners = [self._runner(connector, number) for number in range(len(task_configs))]
        except Exception:
            connector.state = State.FAILED
            connector.trace = traceback.format_exc()
            connector.runners = []
            log.error("connector %r failed to start:\n%s", name, connector.trace)
            return
        connector.state = State.PAUSED if connector.paused else State.RUNNING
        if self.cluster is None:
            for runner in connector.runners:
                assert runner is not None
                runner.start()
        else:
            self._start_owned()

    def _runner(self, connector: _Connector, number: int) -> TaskRunner:
        plugin = self.plugins.get(connector.config["connector.class"])
        config = connector.task_configs[number]
        task = plugin().task()
        group = self.broker.config.broker_name
        clustered = self.cluster is not None
        if plugin.kind == "source":
            assert isinstance(task, api.SourceTask), f"{plugin.__qualname__}.task() is not a SourceTask"
            return SourceRunner(
                self.broker, self._positions, connector.name, number, task, config, connector.paused,
            )  # fmt: skip
        assert isinstance(task, api.SinkTask), f"{plugin.__qualname__}.task() is not a SinkTask"
        share = connector.queues[number :: len(connector.task_configs)]
        remote = None
        if self.cluster is not None and any(queue.broker_name != group for queue in share):
            remote = self.cluster.reader(sink_group(connector.name))
        return SinkRunner(
            self.broker, self._arrivals, connector.name, number, task, config, share, connector.paused,
            remote=remote, clustered=clustered,
        )  # fmt: skip

    async def _sink_queues(self, config: dict[str, Any]) -> list[MessageQueue]:
        """The read queues of the sink's topics, sorted: this group's and, on a cluster, every other live group's."""
        topics = config.get("topics")
        if isinstance(topics, str):
            topics = [topic.strip() for topic in topics.split(",") if topic.strip()]
        if not topics:
            raise ValueError("a sink connector needs 'topics': the topics it reads")
        queues: list[MessageQueue] = []
        for topic in topics:
            found = set(self.broker.route(topic).read_queues)  # auto-creates the topic when the broker allows it
            if self.cluster is not None:
                # Every queue seen, of live groups or not: a group's death does not split the queues again, so a
                # task moves with its share, which its own stored offsets cover (exactly-once sinks).
                found |= set(await self.cluster.other_queues(topic))
                found = self._known_queues[topic] = found | self._known_queues.get(topic, set())
            queues += found
        return sorted(queues, key=lambda queue: (queue.topic, queue.broker_name, queue.queue_id))

    async def _stop_tasks(self, connector: _Connector) -> None:
        for runner in connector.runners:
            if runner is not None:
                await runner.stop()
