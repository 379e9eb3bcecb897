"""`GET /metrics`: what every part of `mqgate serve` counts, in the Prometheus text format (prometheus-client).

Nothing here is on a message's path. The parts keep plain counters (core.TopicTraffic on the broker, the store's
FlushTimes, the MQTT gateway's MqttTraffic and refusals, EventBridge's target stats and put errors, the connector
worker's task states) and `MqgateCollector` reads them when Prometheus scrapes, as rocketmq-exporter reads a
broker's stats. The one thing kept over time is `TopicRates`: a sample of the per-topic counters every
RATE_SAMPLE_S, from which the produce and consume rates over the last RATE_WINDOW_S are computed.

Families, in the spirit of rocketmq-exporter (topic, group and queue labels; its `rocketmq_group_diff` is our
`mqgate_consumer_lag`) and of Mosquitto's $SYS tree; the README's Metrics section lists them.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from connectors.worker import Worker
from core import Broker, MessageStore, TopicCounts
from eventbridge.runtime import EventBridgeRuntime
from mqgate.http.mqtt_metrics import mqtt_families, reason_name
from mqtt_bridge.gateway import MqttGateway

log = logging.getLogger(__name__)

# The window of the produce and consume rates: rocketmq-exporter's TPS figures are per minute of broker stats too.
RATE_WINDOW_S = 60.0
# How often the per-topic counters are sampled for the rates; the rate covers the window to within this.
RATE_SAMPLE_S = 5.0
# Connector and task states (connectors/task_runner.py State, and a connector's UNASSIGNED before it starts).
CONNECTOR_STATES = ("RUNNING", "PAUSED", "FAILED", "UNASSIGNED")
METRICS_PATH = "/metrics"


class TopicRates:
    """Messages/s in and out per topic over the last `window_s`, from samples of core.TopicTraffic's counters.

    Pure: the caller samples (`sample(now, counts)`) and asks (`rates(now, counts)`) with its clock's time, so the
    arithmetic is testable without waiting. A rate is (count now - count at the oldest sample in the window) /
    (time since that sample): just after the start, over the seconds there are. A topic missing from that sample
    counted from 0 then.
    """

    def __init__(self, start_s: float, window_s: float = RATE_WINDOW_S) -> None:
        self.window_s = window_s
        self._samples: collections.deque[tuple[float, dict[str, tuple[int, int]]]] = collections.deque()
        self._samples.append((start_s, {}))

    def sample(self, now_s: float, counts: dict[str, TopicCounts]) -> None:
        self._samples.append((now_s, {topic: (c.messages_in, c.messages_out) for topic, c in counts.items()}))
        # Keep the newest sample at least `window_s` old: it is where the next rates start.
        while len(self._samples) > 1 and self._samples[1][0] <= now_s - self.window_s:
            self._samples.popleft()

    def rates(self, now_s: float, counts: dict[str, TopicCounts]) -> dict[str, tuple[float, float]]:
        """(produce, consume) messages/s per topic of `counts`."""
        start = self._samples[0]
        for sample in self._samples:
            if sample[0] < now_s - self.window_s:
                start = sample
            else:
                break
        since, old = start
        elapsed = now_s - since
        if elapsed <= 0:
            return {topic: (0.0, 0.0) for topic in counts}
        rates = {}
        for topic, c in counts.items():
            old_in, old_out = old.get(topic, (0, 0))
            rates[topic] = ((c.messages_in - old_in) / elapsed, (c.messages_out - old_out) / elapsed)
        return rates


@dataclass(slots=True)
class Parts:
    """What the collector reads: the broker and its store (which the wiring opened) always, the others when they
    run."""

    broker: Broker
    store: MessageStore
    gateway: MqttGateway | None
    eventbridge: EventBridgeRuntime | None
    worker: Worker | None


class MqgateCollector(Collector):
    """Reads every part's counters at scrape time. `disk` holds the store's disk usage, which takes a stat per file:
    the HTTP handler refreshes it in a thread before each scrape (`refresh_disk`)."""

    def __init__(self, parts: Parts, rates: TopicRates, clock: Callable[[], float] = time.monotonic) -> None:
        self.parts = parts
        self.rates = rates
        self.clock = clock
        self.disk: dict[str, int] = {}
        self.disk_ratio = 0.0

    async def refresh_disk(self) -> None:
        store = self.parts.store
        self.disk, self.disk_ratio = await asyncio.to_thread(lambda: (store.disk_usage(), store.disk_usage_ratio()))

    def collect(self) -> Iterator[Metric]:
        parts = self.parts
        yield from self._topics()
        yield from self._offsets()
        yield from self._store()
        yield from self._replication()
        yield from self._refusals()
        if parts.gateway is not None:
            yield from mqtt_families(parts.gateway)
        if parts.eventbridge is not None:
            yield from self._eventbridge(parts.eventbridge)
        if parts.worker is not None:
            yield from self._connectors(parts.worker)

    def _topics(self) -> Iterator[Metric]:
        counts = self.parts.broker.traffic.snapshot()
        families = {
            "messages_in": CounterMetricFamily(
                "mqgate_topic_messages_in", "Messages stored in the topic by sends", labels=["topic"]
            ),
            "bytes_in": CounterMetricFamily(
                "mqgate_topic_bytes_in", "Body bytes of the messages stored in the topic by sends", labels=["topic"]
            ),
            "messages_out": CounterMetricFamily(
                "mqgate_topic_messages_out",
                "Messages of the topic delivered to consumers (pulls, pops, MQTT deliveries)",
                labels=["topic"],
            ),
            "bytes_out": CounterMetricFamily(
                "mqgate_topic_bytes_out",
                "Body bytes of the messages of the topic delivered to consumers",
                labels=["topic"],
            ),
        }
        produce = GaugeMetricFamily(
            "mqgate_topic_produce_rate",
            f"Messages/s stored in the topic over the last {RATE_WINDOW_S:.0f} s (less just after the start)",
            labels=["topic"],
        )
        consume = GaugeMetricFamily(
            "mqgate_topic_consume_rate",
            f"Messages/s of the topic delivered to consumers over the last {RATE_WINDOW_S:.0f} s (less just after the"
            " start)",
            labels=["topic"],
        )
        rates = self.rates.rates(self.clock(), counts)
        for topic, c in sorted(counts.items()):
            for name, family in families.items():
                family.add_metric([topic], getattr(c, name))
            produce.add_metric([topic], rates[topic][0])
            consume.add_metric([topic], rates[topic][1])
        yield from families.values()
        yield produce
        yield consume

    def _offsets(self) -> Iterator[Metric]:
        broker = self.parts.broker
        committed = GaugeMetricFamily(
            "mqgate_consumer_offset",
            "The group's committed offset in the queue: the index of the next message it will read",
            labels=["group", "topic", "queue"],
        )
        lag = GaugeMetricFamily(
            "mqgate_consumer_lag",
            "Messages in the queue past the group's committed offset (the queue's max offset minus it; "
            "rocketmq-exporter's rocketmq_group_diff)",
            labels=["group", "topic", "queue"],
        )
        maximum = GaugeMetricFamily(
            "mqgate_queue_max_offset",
            "The queue's max offset: the index the next message stored in it will get",
            labels=["topic", "queue"],
        )
        queues: dict[tuple[str, int], int] = {}
        for config in broker.topic_configs():
            for queue_id in range(config.read_queue_nums):
                queues[(config.topic_name, queue_id)] = broker.max_offset(config.topic_name, queue_id)
        for group, topic, queue_id, offset in broker.committed_offsets():
            high = queues.get((topic, queue_id))
            if high is None:  # a light queue (an MQTT session's filter), which has no topic config
                high = queues[(topic, queue_id)] = broker.max_offset(topic, queue_id)
            labels = [group, topic, str(queue_id)]
            committed.add_metric(labels, offset)
            lag.add_metric(labels, max(high - offset, 0))
        for (topic, queue_id), high in sorted(queues.items()):
            maximum.add_metric([topic, str(queue_id)], high)
        yield committed
        yield lag
        yield maximum

    def _store(self) -> Iterator[Metric]:
        store = self.parts.store
        size = GaugeMetricFamily(
            "mqgate_store_size_bytes",
            "Bytes the store's files take on disk (allocated blocks), by part: commitlog, consumequeue, index,"
            " write_ring",
            labels=["part"],
        )
        for part, value in sorted(self.disk.items()):
            size.add_metric([part], value)
        yield size
        yield GaugeMetricFamily(
            "mqgate_store_disk_usage_ratio",
            "Used fraction of the file system holding the store (retention acts at disk_clean_ratio, writes are "
            "refused at disk_refuse_ratio)",
            value=self.disk_ratio,
        )
        times = store.flush_times
        counts, total_s = times.snapshot()
        buckets = []
        cumulative = 0
        for bound, count in zip([*times.bounds, float("inf")], counts, strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        yield HistogramMetricFamily(
            "mqgate_store_flush_seconds",
            "Time each flush of the commit log to disk took (those that wrote something)",
            buckets=buckets,
            sum_value=total_s,
        )

    def _replication(self) -> Iterator[Metric]:
        state = self.parts.broker.ha.state()
        lag_bytes = GaugeMetricFamily(
            "mqgate_replication_lag_bytes",
            "A master's slaves: how far each slave's copy of the commit log is behind the master's, in bytes",
            labels=["slave"],
        )
        lag_seconds = GaugeMetricFamily(
            "mqgate_replication_lag_seconds",
            "A master's slaves: how long ago the oldest record a slave lacks was stored (0 when it lacks none)",
            labels=["slave"],
        )
        in_sync = GaugeMetricFamily(
            "mqgate_replication_in_sync",
            "A master's slaves: 1 when within [ha] max_gap_not_in_sync of the master (a SYNC_MASTER waits for it)",
            labels=["slave"],
        )
        for slave in state.slaves:
            lag_bytes.add_metric([slave.address], slave.lag_bytes)
            lag_seconds.add_metric([slave.address], slave.lag_s)
            in_sync.add_metric([slave.address], 1 if slave.in_sync else 0)
        yield lag_bytes
        yield lag_seconds
        yield in_sync
        if state.master is not None:
            yield GaugeMetricFamily(
                "mqgate_replication_master_connected",
                "A slave: 1 while its link to its master is up",
                value=1 if state.master.connected else 0,
            )

    def _refusals(self) -> Iterator[Metric]:
        parts = self.parts
        refused = CounterMetricFamily(
            "mqgate_refused_messages",
            "Messages refused, by part (mqtt: PUBLISHes, by MQTT 5 reason code name; store: writes the store refused; "
            "eventbridge: PutEvents entries, by error code)",
            labels=["part", "reason"],
        )
        for reason, count in sorted(parts.broker.traffic.refused.items()):
            refused.add_metric(["store", reason], count)
        dropped = CounterMetricFamily(
            "mqgate_dropped_messages",
            "Messages accepted and later dropped, by part and reason (mqtt max_queued_messages: a session's backlog "
            "past the bound, oldest first)",
            labels=["part", "reason"],
        )
        gateway = parts.gateway
        if gateway is not None:
            for code, count in sorted(gateway.counters.refusals.items()):
                refused.add_metric(["mqtt", reason_name(code)], count)
            dropped.add_metric(["mqtt", "max_queued_messages"], gateway.counters.dropped)
        if parts.eventbridge is not None:
            for error_code, events in sorted(parts.eventbridge.put_errors.items()):
                refused.add_metric(["eventbridge", error_code], events)
        yield refused
        yield dropped

    def _eventbridge(self, runtime: EventBridgeRuntime) -> Iterator[Metric]:
        labels = ["bus", "rule", "target"]
        families = {
            "matched": CounterMetricFamily(
                "mqgate_eventbridge_matched", "Events routed to the rule target (matched its rule)", labels=labels
            ),
            "delivered": CounterMetricFamily(
                "mqgate_eventbridge_delivered", "Events the target accepted", labels=labels
            ),
            "retries": CounterMetricFamily(
                "mqgate_eventbridge_retried", "Delivery attempts that failed and were retried", labels=labels
            ),
            "dead_lettered": CounterMetricFamily(
                "mqgate_eventbridge_dead_lettered",
                "Events given up on under the retry policy and stored in the dead-letter topic",
                labels=labels,
            ),
        }
        for key, task in sorted(runtime.target_tasks().items(), key=lambda item: str(item[0])):
            values = [key.bus, key.rule, key.target]
            for name, family in families.items():
                family.add_metric(values, getattr(task.stats, name))
        yield from families.values()
        if runtime.cluster is not None:
            # Which node runs each target: its counts above are on that node's /metrics only.
            node = GaugeMetricFamily(
                "mqgate_eventbridge_target_node",
                "1 for the broker group whose node runs the target (on a cluster)",
                labels=[*labels, "node"],
            )
            for key in sorted(runtime.targets(), key=str):
                node.add_metric([key.bus, key.rule, key.target, runtime.node_of(key)], 1.0)
            yield node
            yield GaugeMetricFamily(
                "mqgate_eventbridge_cluster_groups",
                "Broker groups live in the cluster",
                value=len(runtime.cluster.live.live),
            )

    def _connectors(self, worker: Worker) -> Iterator[Metric]:
        connectors = GaugeMetricFamily(
            "mqgate_connector_state",
            "1 for the connector's current state, 0 for the others",
            labels=["connector", "state"],
        )
        tasks = GaugeMetricFamily(
            "mqgate_connector_task_state",
            "1 for the task's current state, 0 for the others",
            labels=["connector", "task", "state"],
        )
        # On a cluster every node shows every task (one running elsewhere in its owner's state); which node runs it
        # is this gauge's label, and what runs here the next one.
        workers = GaugeMetricFamily(
            "mqgate_connector_task_worker",
            "1 for the worker (on a cluster: the broker group) that runs the task",
            labels=["connector", "task", "worker"],
        )
        for name in sorted(worker.connectors()):
            with contextlib.suppress(LookupError):  # deleted meanwhile
                status = worker.status(name)
                for state in CONNECTOR_STATES:
                    connectors.add_metric([name, state], float(status.connector.state == state))
                for task in status.tasks:
                    for state in CONNECTOR_STATES:
                        tasks.add_metric([name, str(task.id), state], float(task.state == state))
                    workers.add_metric([name, str(task.id), task.worker_id], 1.0)
        yield connectors
        yield tasks
        yield workers
        yield GaugeMetricFamily(
            "mqgate_connect_tasks_running",
            "connector tasks running (or paused) in this process, not failed",
            value=worker.running_tasks(),
        )


class Metrics:
    """The registry `GET /metrics` serves and the sampler of topic rates; `start` runs the sampler until `close`."""

    def __init__(self, parts: Parts, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.rates = TopicRates(clock())
        self.collector = MqgateCollector(parts, self.rates, clock)
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self.collector)
        ProcessCollector(registry=self.registry)  # process_cpu_seconds_total, process_resident_memory_bytes, ...
        self._sampler: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._sampler = asyncio.get_running_loop().create_task(self._sample(), name="metrics rate sampler")

    async def close(self) -> None:
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler

    async def _sample(self) -> None:
        traffic = self.collector.parts.broker.traffic
        while True:
            await asyncio.sleep(RATE_SAMPLE_S)
            self.rates.sample(self.clock(), traffic.snapshot())

    async def render(self) -> bytes:
        await self.collector.refresh_disk()
        return generate_latest(self.registry)


METRICS_KEY: web.AppKey[Metrics] = web.AppKey("metrics", Metrics)


def add_routes(app: web.Application, metrics: Metrics) -> None:
    """`GET /metrics` on the HTTP port (behind `[http] token` like every route: Prometheus sends it with
    `authorization: {credentials: ...}` in its scrape config)."""
    app[METRICS_KEY] = metrics
    app.router.add_get(METRICS_PATH, _metrics)


async def _metrics(request: web.Request) -> web.Response:
    body = await request.app[METRICS_KEY].render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
