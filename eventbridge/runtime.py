"""The EventBridge runtime inside `mqgate serve`: buses, the rules of a watched directory, and one sink runner per
rule target delivering the bus's matching events.

- Buses are core topics (bus.py); `default` always exists, and a bus named by a rule is created with it.
- Rules are read from `rules_dir` (rule_directory) at start and whenever a file there changes (polled every
  `reload_interval_s`: no inotify dependency, and an editor's save-by-rename is seen the same way). A refused file
  keeps its rules in force and its error is kept for `errors`, with the rules it names (read leniently), so that
  the API can say why a rule it was meant to define is missing or old.
- Routing (router.py): every event put on a bus is matched once, when it is stored, against one compiled machine
  of the bus's enabled rules, and gets an entry in the delivery queue (a core light queue) of each target it
  matched. A reload swaps the machines whole; targets' queues and positions are untouched, so a changed pattern
  applies to the events put from then on and nothing routed before is lost or routed again.
- Each enabled (rule, target) runs a `SinkRunner` with a `TargetTask` on the connector runtime's machinery,
  reading its delivery queue as the consumer group `connect-eb|<bus>|<rule>|<target>`. A reload restarts only the
  targets whose settings changed, from their committed offset. A new target starts at the end of its queue
  (events from its creation on, as a new AWS rule; its queue is empty then, so it starts at the queue's first
  entry, which also delivers what was routed to it on a master that died before its slaves copied its offset);
  a target that existed before a restart goes on from its committed offset. A deleted or disabled target's queue
  and offsets are deleted, so when it comes back it starts at the end too (a disabled AWS rule sees nothing).
- On a cluster (cluster.py): the rules directory is every node's, each target runs on its owner's node only,
  reading its delivery queue on every group, and a scheduled rule fires on its owner's node only; targets move
  when the live groups change (`_moved`).
- Scheduled rules (schedules/scheduler.py): each enabled rule with a schedule has a timer on the runtime's clock that
  puts an event restricted to the rule on its bus at each fire time; a reload keeps the timers of unchanged schedules.
- Archives (archives/filler.py): each reads its bus's topic into files of its own under `archives_dir`, with a
  retention of its own. A new archive starts at the end of its bus; a changed pattern or retention applies from the
  next batch; an archive removed from the files is stopped and its files deleted (AWS DeleteArchive). One found
  on disk at start with no definition is left alone, not deleted: its rule file may be refused only for now.
- Data written before routing existed: a target whose group still has offsets in the bus topic itself (it read
  the bus as a whole) has the events it had not delivered, from those offsets to the end of the bus, matched with
  its rule and copied into its queue first (in batches, the offsets committed after each: a crash repeats at most
  a batch); then those offsets are deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from connectors.sink_runner import SinkRunner, sink_group
from connectors.task_runner import Arrivals
from core import Broker, CoreError, MessageQueue, PullConsumer, PullStatus
from eventbridge.archives.filler import ArchiveFiller
from eventbridge.bus import BusError, EventBuses, OnlyFor, bus_topic, decode_event, default_dead_letter_topic
from eventbridge.cluster import EventBridgeCluster
from eventbridge.errors import RuleFileError
from eventbridge.event_schema import SchemaRegistry
from eventbridge.patterns.compiler import compile_pattern
from eventbridge.patterns.matcher import Matcher
from eventbridge.router import EventRouter, target_queue
from eventbridge.rules.directory import load_rule_directory, rule_files
from eventbridge.rules.model import DEFAULT_BUS, Archive, BusTarget, EventSource, Rule, RuleKey, RuleSet, Target
from eventbridge.schedules.scheduler import Scheduler
from eventbridge.source_task import EventSourceTask
from eventbridge.targets.clock import Clock, SystemClock
from eventbridge.targets.local_targets import Deliverers, HttpDeliverer, LocalTargets, MqttPublisher
from eventbridge.targets.target_task import TargetTask
from peers.owners import HANDOVER_S

log = logging.getLogger(__name__)

# How often the rules directory is looked at for changes.
DEFAULT_RELOAD_INTERVAL_S = 1.0
# Events handed to one target's put: its concurrency bounds the requests in flight, this the memory held.
TARGET_BATCH_SIZE = 256
# How long stopping a target waits for its batch in flight to be delivered and committed.
STOP_GRACE_S = 5.0
# How long a reload waits for appended events to become visible in the consume queues (milliseconds normally).
VISIBLE_TIMEOUT_S = 10.0
# A target with nothing to deliver reads its queue again after this long even without an arrival (arrivals wake it
# at once): thousands of idle targets polling every second would keep a core busy.
TARGET_IDLE_WAIT_S = 30.0
# Events of the bus read per step when a target's backlog from before routing is copied into its queue.
LEGACY_BATCH = 256
# Where archives keep their files when the runtime is not told (mqgate serve: DATA_DIR/eventbridge/archives), next
# to the rules directory.
ARCHIVES_SUBDIR = Path("eventbridge") / "archives"


@dataclass(frozen=True, slots=True)
class TargetKey:
    bus: str
    rule: str
    target: str

    @property
    def connector(self) -> str:
        # Consumer-group names take [%|a-zA-Z0-9_-]; rule and target names may hold '.', which '%' stands for
        # (neither name can hold '%' itself, so no two targets share a group).
        return "|".join(("eb", self.bus, self.rule.replace(".", "%"), self.target.replace(".", "%")))

    def __str__(self) -> str:
        return f"{self.bus}/{self.rule}/{self.target}"

    @property
    def queue(self) -> str:
        """The target's delivery queue (router.target_queue)."""
        return target_queue(self.bus, self.rule, self.target)


@dataclass(slots=True)
class _RunningSource:
    source: EventSource
    task: EventSourceTask
    runner: SinkRunner


@dataclass(slots=True)
class _Running:
    rule: Rule
    target: Target
    task: TargetTask
    runner: SinkRunner


class EventBridgeRuntime:
    def __init__(
        self,
        broker: Broker,
        rules_dir: Path,
        deliverer: HttpDeliverer,
        *,
        clock: Clock | None = None,
        rng: random.Random | None = None,
        reload_interval_s: float = DEFAULT_RELOAD_INTERVAL_S,
        mqtt: MqttPublisher | None = None,
        archives_dir: Path | None = None,
        cluster: EventBridgeCluster | None = None,
    ) -> None:
        self.broker = broker
        self.cluster = cluster
        self.rules_dir = Path(rules_dir)
        self.archives_dir = Path(archives_dir) if archives_dir is not None else self.rules_dir.parent / ARCHIVES_SUBDIR
        self.clock = clock or SystemClock()
        self.rng = rng or random.Random()
        self.reload_interval_s = reload_interval_s
        self.buses = EventBuses(broker)
        # HTTP targets through `deliverer`; core topics, MQTT (when the gateway runs) and buses inside mqgate.
        self.deliverer = Deliverers(deliverer, LocalTargets(broker, self.buses, mqtt))
        self.router = EventRouter.of(broker)
        self.scheduler = Scheduler(self.buses, self.clock)
        self.rules = RuleSet()
        self.schemas = SchemaRegistry()
        self.errors: tuple[RuleFileError, ...] = ()
        self._declared: Mapping[str, tuple[RuleKey, ...]] = {}  # the rules each refused file names, by path
        self._arrivals = Arrivals()
        self._running: dict[TargetKey, _Running] = {}  # the targets running here
        # Every enabled target of the rules in force, running here or (on a cluster) on its owner's node.
        self._targets: dict[TargetKey, tuple[Rule, Target]] = {}
        # On a cluster, targets gained are started from then on (HANDOVER_S after the live groups changed).
        self._hold_until = 0.0
        self._starting_later: asyncio.Task[None] | None = None
        self._moving: asyncio.Task[None] | None = None
        self._reloading: asyncio.Task[tuple[RuleFileError, ...]] | None = None
        self._sources: dict[str, _RunningSource] = {}
        self._archives: dict[str, ArchiveFiller] = {}
        self._signature: tuple[tuple[str, int, int], ...] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        # PutEvents refusals by error code (per entry; per request for a request refused whole): see count_put_error.
        self.put_errors: dict[str, int] = {}
        # Started and not closed. Under automatic failover the runtime runs for each term of its broker as master
        # (started again, with a new cluster part, after each close); its HTTP API refuses while it does not.
        self.active = False
        self._listening = False
        # On a cluster, a replay another node asked for: this group's part (set by the replay API).
        self.replay_requested: Callable[[dict[str, Any]], None] = lambda request: None

    # --- life cycle ----------------------------------------------------------------------------------------

    async def start(self, cluster: EventBridgeCluster | None = None) -> None:
        """Start (again, after `close`: a new term as master, with its `cluster` part when given)."""
        if cluster is not None:
            self.cluster = cluster
        self.rules_dir.mkdir(parents=True, exist_ok=True)
        self.buses.create(DEFAULT_BUS)
        if not self._listening:  # a listener cannot be taken back: one for every term
            self.broker.add_arrival_listener(self._arrivals.notify)
            self._listening = True
        if self.cluster is not None:
            # A target this node owns may have run on another node until this one started.
            self._hold_until = asyncio.get_running_loop().time() + HANDOVER_S
            self.cluster.live.changed = self._moved
            self.cluster.rules.changed = self._changed_elsewhere
            self.cluster.replay_requested = lambda request: self.replay_requested(request)
        await self.reload()
        self._watcher = asyncio.get_running_loop().create_task(self._watch(), name="eventbridge rules watcher")
        self.active = True
        log.info("eventbridge: %d rules from %s, %d targets running", len(self.rules), self.rules_dir,
                 len(self._running))  # fmt: skip

    async def close(self) -> None:
        self.active = False
        for task in (self._watcher, self._starting_later, self._moving, self._reloading):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._watcher = self._starting_later = self._moving = self._reloading = None
        async with self._lock:
            await self.scheduler.close()
            runners = [r.runner for r in self._sources.values()] + [r.runner for r in self._running.values()]
            await asyncio.gather(*(_stop(runner) for runner in runners))
            await asyncio.gather(*(filler.stop() for filler in self._archives.values()))
            self._running.clear()
            self._sources.clear()
            self._archives.clear()
            self._targets = {}  # a next term sets them up again, from the offsets its group holds then
            await self._arrivals.close()

    # --- rules ---------------------------------------------------------------------------------------------

    async def reload(self) -> tuple[RuleFileError, ...]:
        """Read the rules directory again and apply what changed; the errors of refused files."""
        async with self._lock:
            # On a cluster, what was written here since last looked at gets its version first (a file the other
            # nodes wrote meanwhile is known, and not taken for this node's).
            writes = self.cluster.rules.scan() if self.cluster is not None else []
            self._signature = self._directory_signature()
            result = load_rule_directory(self.rules_dir, self.rules, compile_pattern=compile_pattern)
            self.rules = result.rules
            self.schemas = SchemaRegistry.of(result.rules.schemas)
            self.errors = result.errors
            self._declared = result.declared
            await self._apply(result.rules)
        if writes and self.cluster is not None:
            # On every other live node's disk before the API answers (a node that cannot be told is told later).
            await self.cluster.rules.publish(writes)
        return result.errors

    def _changed_elsewhere(self) -> None:
        """Another node's rule file was written here: read the directory again (once for a burst of them)."""
        if self._reloading is None or self._reloading.done():
            self._reloading = asyncio.get_running_loop().create_task(self.reload(), name="eventbridge rules reload")

    def node_of(self, key: TargetKey) -> str:
        """The broker group whose node runs target `key` (this one's alone)."""
        return self.cluster.owner(str(key)) if self.cluster is not None else self.broker.config.broker_name

    def _owns(self, key: TargetKey) -> bool:
        return self.cluster is None or self.cluster.owns(str(key))

    def refusal_naming(self, key: RuleKey) -> RuleFileError | None:
        """The error of a refused file that names rule `key` (what a reader of the file meant to define), if any."""
        return next((error for error in self.errors if key in self._declared.get(error.path, ())), None)

    def refusal_of_file(self, path: str) -> RuleFileError | None:
        """The error of the file at `path` if it is refused now (its rules in force are then from before)."""
        return next((error for error in self.errors if error.path == path), None)

    def declared_by(self, error: RuleFileError) -> tuple[RuleKey, ...]:
        """The rules a refused file names, as far as it could be read."""
        return self._declared.get(error.path, ())

    def count_put_error(self, code: str, events: int = 1) -> None:
        """A PutEvents entry (or whole request) refused with `code`, for the metrics."""
        self.put_errors[code] = self.put_errors.get(code, 0) + events

    def targets(self) -> list[TargetKey]:
        """Every enabled target, running here or (on a cluster) on its node."""
        return list(self._targets)

    def target_tasks(self) -> dict[TargetKey, TargetTask]:
        return {key: running.task for key, running in self._running.items()}

    def runner(self, key: TargetKey) -> SinkRunner:
        return self._running[key].runner

    async def _apply(self, rules: RuleSet) -> None:
        wanted: dict[TargetKey, tuple[Rule, Target]] = {}
        for rule in rules:
            if not rule.enabled:
                continue
            for target in rule.targets:
                wanted[TargetKey(rule.bus, rule.name, target.id)] = (rule, target)
        gone = [key for key in self._targets if key not in wanted]
        for key, running in list(self._running.items()):
            want = wanted.get(key)
            if want is None or running.target != want[1] or not self._owns(key):
                await _stop(running.runner)
                del self._running[key]
                log.info("eventbridge: target %s stopped", key)
            else:
                running.rule = want[0]
                running.task.rule = want[0]
        # New to this node (on a cluster each node sets where the target starts in its own group's queue, before
        # it routes there, whichever node runs the target).
        new = [key for key in wanted if key not in self._targets]
        if new:
            # A new target starts at the start of its queue, set before routing to it begins. Its queue is empty
            # then, so it starts at the end: a deleted target's queue was deleted with it. Entries with no offset
            # are ones routed to it before this node had its offset: a slave elected master copies the offsets
            # every 10 s, so a target made just before the old master died has none here yet, and starting at the
            # end would skip what was routed to it and never delivered. Every entry appended so far must be
            # visible for the start to be right.
            await self.broker.wait_visible(VISIBLE_TIMEOUT_S)
            self.broker.create_groups(sink_group(key.connector) for key in new)  # one write for them all
            for key in new:
                self.buses.create(key.bus)
                group = sink_group(key.connector)
                if self.broker.query_offset(group, key.queue, 0) < 0:
                    self.broker.commit_offset(group, key.queue, 0, self.broker.min_offset(key.queue, 0))
            # On disk before the first event is routed to them: a target whose start offset a crash forgot would
            # start again at the end of its queue after the restart, skipping events acknowledged to their
            # senders and routed to it before the crash.
            await self.broker.persist_offsets()
        self.router.update(rule for rule in rules if rule.enabled)
        for key in gone:
            # Deleted or disabled: enabled again, it starts at the end, as a new AWS rule does, instead of
            # delivering what came meanwhile.
            self.broker.delete_light_queue(key.queue)
            self.broker.delete_group_offsets(sink_group(key.connector))
        for key in new:
            await self._copy_legacy_backlog(key, wanted[key][0])
        self._targets = wanted
        self._start_owned()
        # After the targets: a schedule's first event finds its rule's targets started and routed to.
        self.scheduler.update(rule for rule in rules if self._fires_here(rule))

        wanted_sources = {source.name: source for source in rules.sources.values() if source.enabled}
        for name, running_source in list(self._sources.items()):
            if wanted_sources.get(name) != running_source.source:
                await _stop(running_source.runner)
                del self._sources[name]
                if name not in wanted_sources:
                    self.broker.delete_group_offsets(sink_group(running_source.runner.connector))
                log.info("eventbridge: source %r stopped", name)
        if any(name not in self._sources for name in wanted_sources):
            # A new source starts at the end of its topic: every message appended so far must be in the consume
            # queues (the dispatcher thread puts it there a little after the append) before the end is read.
            await self.broker.wait_visible(VISIBLE_TIMEOUT_S)

        starting: list[tuple[str, EventSource, list[MessageQueue]]] = []
        for name, source in wanted_sources.items():
            if name not in self._sources:
                try:
                    starting.append((name, source, self._source_queues(source)))
                except CoreError as exc:
                    log.error("eventbridge: source %r not started: %s", name, exc)
        if starting:
            # Where new sources start, on disk before they read: forgotten in a crash, a source would start at the
            # end of its topic again and skip the messages devices sent meanwhile.
            await self.broker.persist_offsets()
        for name, source, queues in starting:
            self._sources[name] = self._start_source(source, queues)
            log.info("eventbridge: source %r started (%s -> bus %r)", name, source.mqtt or source.topic, source.bus)
        await self._apply_archives(rules.archives)

    def _fires_here(self, rule: Rule) -> bool:
        return self.cluster is None or self.cluster.owns(f"schedule {rule.key}")

    def _start_owned(self) -> None:
        """Start the targets this node runs that are not running (on a cluster, those gained only once the hold
        after a change of the live groups is over: later, by a task, if it is not)."""
        loop = asyncio.get_running_loop()
        held = False
        for key, (rule, target) in self._targets.items():
            if key in self._running or not self._owns(key):
                continue
            if loop.time() < self._hold_until:
                held = True
                continue
            self._running[key] = self._start(key, rule, target)
            log.info("eventbridge: target %s started", key)
        if held and (self._starting_later is None or self._starting_later.done()):
            self._starting_later = loop.create_task(self._start_later(), name="eventbridge targets gained")

    async def _start_later(self) -> None:
        await asyncio.sleep(max(0.0, self._hold_until - asyncio.get_running_loop().time()))
        async with self._lock:
            self._start_owned()

    def _moved(self) -> None:
        """The live groups changed (cluster.py): stop at once what another node runs now; start what this one
        gained after HANDOVER_S."""
        self._hold_until = asyncio.get_running_loop().time() + HANDOVER_S
        if self._moving is None or self._moving.done():
            self._moving = asyncio.get_running_loop().create_task(self._move(), name="eventbridge targets moving")

    async def _move(self) -> None:
        async with self._lock:
            lost = [key for key in self._running if not self._owns(key)]
            await asyncio.gather(*(_stop(self._running[key].runner) for key in lost))
            for key in lost:
                del self._running[key]
                log.info("eventbridge: target %s stopped: broker group %s runs it now", key, self.node_of(key))
            self.scheduler.update(rule for rule in self.rules if self._fires_here(rule))
            self._start_owned()

    # --- archives ------------------------------------------------------------------------------------------

    def archives(self) -> dict[str, ArchiveFiller]:
        return dict(self._archives)

    async def _apply_archives(self, wanted: Mapping[str, Archive]) -> None:
        for name, filler in list(self._archives.items()):
            want = wanted.get(name)
            if want is None:
                del self._archives[name]
                await filler.delete()
                log.info("eventbridge: archive %r deleted, its files with it", name)
            elif want.bus != filler.archive.bus:
                # Started again below, where its files refuse the other bus (the archive is then FAILED).
                del self._archives[name]
                await filler.stop()
            else:
                filler.update(want)
        for name, archive in wanted.items():
            if name not in self._archives:
                self.buses.create(archive.bus)
                filler = ArchiveFiller(self.broker, archive, self.archives_dir / name, self._arrivals, self.clock)
                self._archives[name] = filler  # shown CREATING while it starts
                await filler.start()

    def source_runner(self, name: str) -> SinkRunner:
        return self._sources[name].runner

    def source_tasks(self) -> dict[str, EventSourceTask]:
        return {name: running.task for name, running in self._sources.items()}

    def _source_queues(self, source: EventSource) -> list[MessageQueue]:
        """The queues a new source reads, its group's start at their end committed (not yet persisted)."""
        self.buses.create(source.bus)
        # The MQTT gateway writes a first-level topic when a device first publishes there; route() creates it
        # now if the broker auto-creates topics, and raises if not (the source is then reported, not started).
        queues = sorted(self.broker.route(source.core_topic).read_queues, key=lambda queue: queue.queue_id)
        self.broker.create_groups([sink_group(_source_connector(source))])
        self._start_new_group_at_end(sink_group(_source_connector(source)), queues)
        return queues

    def _start_source(self, source: EventSource, queues: list[MessageQueue]) -> _RunningSource:
        connector = _source_connector(source)
        task = EventSourceTask(source, self.buses, lambda: self.schemas)
        runner = SinkRunner(self.broker, self._arrivals, connector, 0, task, {"errors.retry.timeout": 60_000}, queues)
        runner.start()
        return _RunningSource(source, task, runner)

    def _start(self, key: TargetKey, rule: Rule, target: Target) -> _Running:
        dead_letters = target.dead_letter_topic or default_dead_letter_topic(rule.bus)
        if not self.broker.has_topic(dead_letters):
            self.broker.create_topic(dead_letters, 1)
        if isinstance(target, BusTarget):
            self.buses.create(target.bus)  # a bus named by a rule is created with it
        queues = [MessageQueue(key.queue, self.broker.config.broker_name, 0)]
        remote = None
        if self.cluster is not None:
            queues = self.cluster.queues(key.queue)
            remote = self.cluster.reader(sink_group(key.connector))
        task = TargetTask(self.broker, rule, target, self.deliverer, dead_letters, self.clock, self.rng)
        config: dict[str, Any] = {
            "batch.size": TARGET_BATCH_SIZE,
            # A put fails only when a dead letter cannot be stored (disk full): retried for a minute, then the
            # target is FAILED, visible in its status, and its events wait in its queue.
            "errors.retry.timeout": 60_000,
        }
        runner = SinkRunner(
            self.broker, self._arrivals, key.connector, 0, task, config, queues, idle_wait_s=TARGET_IDLE_WAIT_S,
            remote=remote,
        )  # fmt: skip
        runner.start()
        return _Running(rule, target, task, runner)

    async def _copy_legacy_backlog(self, key: TargetKey, rule: Rule) -> None:
        """Copy into the target's queue the events its group had not delivered when it still read the bus topic
        itself (before routing), then forget those offsets."""
        group = sink_group(key.connector)
        topic = bus_topic(key.bus)
        if not self.broker.has_topic(topic):
            return
        legacy = {
            queue.queue_id: offset
            for queue in self.broker.read_queues(topic)
            if (offset := self.broker.query_offset(group, topic, queue.queue_id)) >= 0
        }
        if not legacy:
            return
        # A rule without a pattern matched nothing of the bus: its offsets there are forgotten, nothing copied.
        matcher: Matcher[str] = Matcher([(rule.name, rule.pattern.value)] if rule.pattern is not None else [])
        only = OnlyFor(str(rule.key), key.target)
        reader = PullConsumer(self.broker, group)
        copied = 0
        for queue_id, offset in sorted(legacy.items()):
            end = self.broker.max_offset(topic, queue_id)
            queue = MessageQueue(topic, self.broker.config.broker_name, queue_id)
            while offset < end:
                got = await reader.pull(queue, offset, LEGACY_BATCH)
                if got.status is not PullStatus.FOUND:
                    break
                events = []
                for message in got.messages:
                    restricted = OnlyFor.of(message.properties)
                    if restricted is not None:
                        continue  # a replayed or redriven copy: the router sent it where it belongs
                    try:
                        event = decode_event(message.body)
                    except BusError:
                        continue
                    if matcher.matches(event):
                        events.append(event)
                if events:
                    await self.buses.put(key.bus, events, only)
                    copied += len(events)
                offset = got.next_begin_offset
                self.broker.commit_offset(group, topic, queue_id, offset)
        self.broker.delete_group_offsets(group, topic)
        log.info("eventbridge: target %s: %d undelivered events from before routing copied to its queue", key, copied)

    def _start_new_group_at_end(self, group: str, queues: list[MessageQueue]) -> None:
        for queue in queues:
            if self.broker.query_offset(group, queue.topic, queue.queue_id) < 0:
                self.broker.commit_offset(group, queue.topic, queue.queue_id,
                                          self.broker.max_offset(queue.topic, queue.queue_id))  # fmt: skip

    # --- the directory watcher -----------------------------------------------------------------------------

    def _directory_signature(self) -> tuple[tuple[str, int, int], ...]:
        found = []
        for path in rule_files(self.rules_dir) if self.rules_dir.is_dir() else []:
            try:
                stat = path.stat()
            except FileNotFoundError:
                continue
            found.append((path.name, stat.st_mtime_ns, stat.st_size))
        return tuple(found)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.reload_interval_s)
            try:
                if self._directory_signature() != self._signature:
                    errors = await self.reload()
                    log.info("eventbridge: rules reloaded from %s (%d rules, %d files refused)", self.rules_dir,
                             len(self.rules), len(errors))  # fmt: skip
            except Exception:
                log.exception("eventbridge: reloading %s failed; the rules in force stay", self.rules_dir)


async def _stop(runner: SinkRunner) -> None:
    """Let a batch in flight finish (and its offsets be committed) for a while, then stop: a clean stop or a
    reload repeats nothing that was delivered, unless a batch is still retrying after STOP_GRACE_S."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(STOP_GRACE_S):
            await runner.pause()
    await runner.stop()


def _source_connector(source: EventSource) -> str:
    return "|".join(("ebsrc", source.name.replace(".", "%")))
