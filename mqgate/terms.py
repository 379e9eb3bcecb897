"""What runs for each term as master under a controller (mqgate.failover): MQTT, the gRPC endpoint, EventBridge
and the connectors start when the broker is elected and stop when its term ends, on the ports the first term got;
the metrics and the admin API follow the current term's gateway and worker."""

from __future__ import annotations

import contextlib
import dataclasses
import ssl

from broker_remoting.door import BrokerRemoting
from connectors.cluster import ConnectCluster
from connectors.plugins import PluginRegistry
from connectors.rest import WorkerSlot
from connectors.worker import Worker
from core import Broker
from eventbridge.cluster import EventBridgeCluster
from eventbridge.runtime import EventBridgeRuntime
from mqgate.config.settings import Settings
from mqgate.failover import StartDoors
from mqgate.http.admin_api import AdminContext
from mqgate.http.metrics import Parts
from mqgate.mqtt_door import start_mqtt
from mqgate.rocketmq_doors import join_grpc_to_cluster, start_grpc
from mqtt_bridge.gateway import MqttGateway

# The connector runtime's tables' snapshots; connector config files are read from DATA_DIR/connectors.
CONNECT_SUBDIR = "connect"
# EventBridge rule files (YAML), watched for changes.
RULES_SUBDIR = "rules"


def master_doors(
    settings: Settings,
    broker: Broker,
    tls: ssl.SSLContext | None,
    door: BrokerRemoting,
    embedded_namesrv: str | None,
    views: list[Parts | AdminContext],
    eventbridge: EventBridgeRuntime | None,
    worker_slot: WorkerSlot | None,
) -> StartDoors:
    """Under a controller: what starts the doors that write (MQTT, the gRPC endpoint, EventBridge, the connectors)
    for a term as master, on the ports the first term got when they were configured 0."""
    ports: dict[str, int] = {}

    async def start(stack: contextlib.AsyncExitStack) -> list[str]:
        term = dataclasses.replace(
            settings,
            mqtt=dataclasses.replace(settings.mqtt, port=ports.get("mqtt", settings.mqtt.port)),
            grpc=dataclasses.replace(settings.grpc, port=ports.get("grpc", settings.grpc.port)),
        )
        parts: list[str] = []
        gateway = None
        if term.mqtt.enabled:
            mqtt_parts, gateway = await start_mqtt(term, broker, stack, tls, list(term.broker.namesrv_addr))
            parts += mqtt_parts
        if term.grpc.enabled:
            grpc_part, endpoint = await start_grpc(term, broker, stack)
            await join_grpc_to_cluster(term, door, endpoint, embedded_namesrv, stack)
            parts.append(grpc_part)
        for part in parts:
            name, _, address = part.partition("=")
            ports.setdefault(name, int(address.rpartition(":")[2]))
        show_gateway(views, gateway)
        stack.callback(show_gateway, views, None)
        if eventbridge is not None:
            await eventbridge_term(term, broker, door, eventbridge, gateway, stack)
        if worker_slot is not None:
            await connectors_term(term, broker, door, worker_slot, views, stack)
        return parts

    return start


def show_gateway(views: list[Parts | AdminContext], gateway: MqttGateway | None) -> None:
    """The metrics and the admin API read the gateway of the current term (None while the broker is a slave)."""
    for view in views:
        view.gateway = gateway


async def start_connectors(
    settings: Settings, broker: Broker, stack: contextlib.AsyncExitStack, cluster: ConnectCluster | None = None
) -> Worker:
    """Start the connector runtime (data in DATA_DIR/connect, connector files in DATA_DIR/connectors). Closed by
    `stack`. On a cluster (`cluster` joined), the configs are the cluster's and each task runs on one node."""
    worker = Worker(broker, settings.data_dir / CONNECT_SUBDIR, PluginRegistry.load(), cluster=cluster)
    await worker.start()
    stack.push_async_callback(worker.close)
    return worker


async def eventbridge_term(
    settings: Settings,
    broker: Broker,
    door: BrokerRemoting,
    runtime: EventBridgeRuntime,
    gateway: MqttGateway | None,
    stack: contextlib.AsyncExitStack,
) -> None:
    """EventBridge for a term as master under a controller: on the cluster (its records topic registered, the
    others' rules taken), its targets and schedules started; stopped by `stack` when the term ends."""
    cluster = None
    namesrv = list(settings.broker.namesrv_addr)
    if namesrv:
        cluster = EventBridgeCluster(
            namesrv, settings.broker.broker_name, settings.data_dir / RULES_SUBDIR, settings.data_dir
        )
        cluster.open(broker)
        if door.registration is not None:
            door.registration.register_now()  # its records topic in the routes the others read
        await cluster.join()
        stack.push_async_callback(cluster.close)
    runtime.deliverer.local.mqtt = gateway
    await runtime.start(cluster)
    stack.push_async_callback(runtime.close)


async def connectors_term(
    settings: Settings,
    broker: Broker,
    door: BrokerRemoting,
    slot: WorkerSlot,
    views: list[Parts | AdminContext],
    stack: contextlib.AsyncExitStack,
) -> None:
    """The connectors for a term as master under a controller: a worker on the cluster (its records topic
    registered, the others' configs taken), served by the API and read by the metrics until `stack` closes."""
    cluster = None
    namesrv = list(settings.broker.namesrv_addr)
    if namesrv:
        cluster = ConnectCluster(namesrv, settings.broker.broker_name, settings.data_dir / CONNECT_SUBDIR)
        cluster.open(broker)
        if door.registration is not None:
            door.registration.register_now()  # its records topic in the routes the others read
        await cluster.join()
        stack.push_async_callback(cluster.close)
    worker = await start_connectors(settings, broker, stack, cluster)
    slot.worker = worker
    show_worker(views, worker)
    stack.callback(show_worker, views, None)
    stack.callback(setattr, slot, "worker", None)


def show_worker(views: list[Parts | AdminContext], worker: Worker | None) -> None:
    for view in views:
        if isinstance(view, Parts):
            view.worker = worker
