"""`mqgate serve`: open the parts on one event loop, announce them in one `ready` line, run until SIGTERM/SIGINT,
then close them in reverse order.

Each part that starts appends its own `key=value` to the list of the ready line (mqgate.process) in `serve` (a
listener adds `mqtt=HOST:PORT`), so scripts and tests wait for one line and read every address from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import ipaddress
import logging
import resource
import sys
from collections.abc import Callable

from connectors.cluster import ConnectCluster
from connectors.rest import WorkerSlot
from connectors.rest import add_routes as add_connector_routes
from connectors.worker import Worker
from core import (
    Broker,
    BrokerRole,
    HAPortUnavailableError,
    MessageStore,
    RecoveryReport,
    open_store,
)
from eventbridge.cluster import EventBridgeCluster
from eventbridge.replay_rest import add_routes as add_replay_routes
from eventbridge.rest import add_routes as add_eventbridge_routes
from eventbridge.runtime import ARCHIVES_SUBDIR, EventBridgeRuntime
from eventbridge.targets.http_target import HttpTargetClient
from mqgate.config.settings import Settings
from mqgate.failover import FailoverWiring
from mqgate.http.admin_api import AdminContext
from mqgate.http.admin_api import add_routes as add_admin_routes
from mqgate.http.admin_messages_api import add_routes as add_admin_message_routes
from mqgate.http.app import HttpServer, build_app
from mqgate.http.dashboard import add_routes as add_dashboard_routes
from mqgate.http.metrics import Metrics, Parts
from mqgate.http.metrics import add_routes as add_metrics_routes
from mqgate.listen_errors import cannot_listen, listen_reason
from mqgate.mqtt_door import open_gateway, open_listeners, start_mqtt, tls_context
from mqgate.process import format_ready, stop_on_signals
from mqgate.rocketmq_doors import (
    join_grpc_to_cluster,
    registered,
    runs_embedded_namesrv,
    start_grpc,
    start_namesrv,
    start_remoting,
)
from mqgate.terms import CONNECT_SUBDIR, RULES_SUBDIR, master_doors, start_connectors
from mqtt_bridge.access.password_file import PasswordFile
from mqtt_bridge.gateway import MqttGateway

log = logging.getLogger(__name__)

# Topic, group and offset files (topics.json, subscriptionGroup.json, consumerOffset.json) live in DATA_DIR/config.
CONFIG_SUBDIR = "config"

# Tracked objects allocated (net of those freed) between young-generation collections; CPython's default is 700.
# The server keeps hundreds of thousands of objects alive (the MQTT gateway's message cache alone holds 100,000
# messages of two objects each), and with the default every 7,000 surviving objects promote into a full
# collection as soon as a quarter of that population is new: a pass over all of it about every 25,000 MQTT
# messages, 50-90 ms each. Measured on the QoS 0 fan-in of bench/mqtt.py: the collector took about 20% of the
# event loop with the default and 3% with this, and no full collection ran during a run. Short-lived garbage
# is freed by reference counting either way; only cycles wait longer, and the server creates few.
GC_YOUNG_THRESHOLD = 50_000
# How long a thread holds the GIL while another waits for it (CPython's default: 5 ms). The store's dispatcher
# thread makes appended messages visible to consumers; while the event loop is busy it waited up to 5 ms for the
# GIL each time, and consumers long-polling for those messages sat idle meanwhile. Measured with bench/broker.py
# (in-process produce and consume, 2 cores): the event loop busy 59% of the time with 5 ms, 80% with 1 ms, and
# 40,000 -> 55,000 messages/s; the MQTT fan-in and fan-out through mqgate serve, the store's appends (SYNC_FLUSH
# groups included) and EventBridge delivery did not move beyond their run-to-run spread.
SWITCH_INTERVAL_S = 0.001
SLAVE_DOORS = (
    "this broker is a SLAVE: it copies its master's log and serves RocketMQ 4 reads over remoting (and the HTTP"
    " admin API and metrics); MQTT, the gRPC endpoint, EventBridge and connectors run on its master"
)


def recovery_part(report: RecoveryReport) -> str:
    # "clean": opened from the checkpoint without reading the log; "scan": the log was scanned and repaired.
    return f"recovery={'clean' if report.clean else 'scan'}"


def _log_recovery(store: MessageStore, report: RecoveryReport) -> None:
    if report.clean:
        return
    log.warning(
        "store %s was not closed cleanly: scanned %d records from offset %d to %d in %.2f s,"
        " cut %d bytes of torn tail, skipped %d corrupt regions, dropped %d consume-queue entries",
        store.config.store_dir,
        report.records_scanned,
        report.start,
        report.end,
        report.seconds,
        report.truncated_bytes,
        len(report.corrupt),
        report.consume_queue_entries_dropped,
    )
    for path, file_offset, skipped in report.corrupt:
        log.warning("corrupt region in %s at file offset %d: %d bytes skipped", path, file_offset, skipped)


def raise_open_file_limit() -> tuple[int, int]:
    """Raise the soft limit on open files (RLIMIT_NOFILE) to the hard limit; return the soft limit before and after.

    Every MQTT connection holds a file descriptor, and the usual soft limit of 1024 would make `accept` fail with
    EMFILE at the 1,000th client on a machine whose hard limit allows far more (systemd's default hard limit is
    524,288). The JVM raises its soft limit to the hard one in the same way at start (HotSpot's MaxFDLimit, on by
    default); a lower soft limit is for the administrator to set as the hard one.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:  # macOS refuses RLIM_INFINITY (OPEN_MAX caps the soft limit)
        log.warning("open file limit stays at %d: raising it to the hard limit %d failed (%s)", soft, hard, exc)
        return soft, soft
    log.info("open file limit raised from %d to %d (the hard limit)", soft, hard)
    return soft, hard


def apply_interpreter_settings() -> None:
    """What the server sets in the interpreter it runs in (GC_YOUNG_THRESHOLD, SWITCH_INTERVAL_S); the in-process
    benchmarks set the same, so that they measure the core as the server runs it."""
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, older, oldest)
    sys.setswitchinterval(SWITCH_INTERVAL_S)


async def serve(settings: Settings, ready: Callable[[str], None]) -> None:
    """Run until SIGTERM or SIGINT, calling `ready` once with the ready line when everything serves."""
    raise_open_file_limit()
    apply_interpreter_settings()
    # A bad certificate is a configuration error: found before the store opens.
    tls = tls_context(settings.mqtt) if settings.mqtt.enabled else None
    # Installed before the store opens, so a signal during a long recovery still ends in a clean close; kept
    # until the close is done.
    with stop_on_signals() as stop:
        log.info("configuration from %s", settings.config_file or "defaults and flags (no configuration file)")
        log.debug("store settings: %s", settings.store)
        store = MessageStore(settings.store)
        log.info("opening store %s (%s)", settings.store.store_dir, settings.store.flush_mode.value)
        try:
            report = await asyncio.to_thread(open_store, store)
        except HAPortUnavailableError as exc:
            raise cannot_listen("ha", "listen_port", None, exc.host, exc.port, exc.reason) from None
        try:
            _log_recovery(store, report)
            broker = Broker(store, settings.data_dir / CONFIG_SUBDIR, settings.broker)
            await broker.start()
            try:
                parts = [f"store={settings.store.store_dir}", recovery_part(report)]
                # A master's HA port (slaves connect to it), named after the remoting port it follows; under a
                # controller every broker's, as any may be elected.
                ha_master = store.replication.master
                ha_part = "ha={}:{}".format(*ha_master.address) if ha_master is not None else ""
                # A slave copies its master's log and serves reads over remoting; every other door writes. Under a
                # controller the broker opens as a slave, and its doors follow its role (mqgate.failover).
                slave = broker.ha.role is BrokerRole.SLAVE
                controlled = settings.controller.enabled
                if slave and not controlled:
                    log.info("%s", SLAVE_DOORS)
                async with contextlib.AsyncExitStack() as parts_stack:
                    gateway = None
                    # On a cluster the gateway joins the other groups once this one is registered (below); its
                    # hooks go on the broker first, so persistent sessions get what the other doors store.
                    cluster = list(settings.broker.namesrv_addr) if settings.remoting.enabled else []
                    mqtt_parts: list[str] = []
                    if settings.mqtt.enabled and not slave:
                        if cluster:
                            gateway = await open_gateway(settings, broker, parts_stack, cluster)
                        else:
                            mqtt_parts, gateway = await start_mqtt(settings, broker, parts_stack, tls)
                    # EventBridge's records topic and listener too, before the first registration.
                    eventbridge_cluster = None
                    if cluster and not slave:
                        eventbridge_cluster = EventBridgeCluster(
                            cluster, settings.broker.broker_name, settings.data_dir / RULES_SUBDIR, settings.data_dir
                        )
                        eventbridge_cluster.open(broker)
                    # The connectors' too (configs shared, tasks placed: connectors/cluster.py).
                    connect_cluster = None
                    if cluster and not slave:
                        connect_cluster = ConnectCluster(
                            cluster, settings.broker.broker_name, settings.data_dir / CONNECT_SUBDIR
                        )
                        connect_cluster.open(broker)
                    endpoint = None
                    if settings.grpc.enabled and not slave:
                        grpc_part, endpoint = await start_grpc(settings, broker, parts_stack)
                        parts.append(grpc_part)
                    # The NameServer first, so the broker registers at once; the ready line names it second.
                    namesrv_part, embedded_namesrv = "", None
                    if runs_embedded_namesrv(settings):
                        namesrv_part, embedded_namesrv = await start_namesrv(settings, parts_stack)
                    door = None
                    if settings.remoting.enabled:
                        remoting_part, door = await start_remoting(settings, broker, parts_stack, embedded_namesrv)
                        parts.append(remoting_part)
                        if endpoint is not None:
                            await join_grpc_to_cluster(settings, door, endpoint, embedded_namesrv, parts_stack)
                    if cluster and door is not None:
                        await registered(door)
                    if eventbridge_cluster is not None:
                        await eventbridge_cluster.join()
                        parts_stack.push_async_callback(eventbridge_cluster.close)
                    if gateway is not None and cluster and door is not None:
                        await gateway.join_cluster()
                        mqtt_parts = await open_listeners(settings, gateway, parts_stack, tls)
                    parts[2:2] = mqtt_parts
                    parts += [ha_part] if ha_part else []
                    parts += [namesrv_part] if namesrv_part else []
                    if connect_cluster is not None:
                        await connect_cluster.join()
                        parts_stack.push_async_callback(connect_cluster.close)
                    worker = None if slave else await start_connectors(settings, broker, parts_stack, connect_cluster)
                    # Under a controller, the connectors run for each term as master (master_doors); their API
                    # answers 503 meanwhile.
                    worker_slot = WorkerSlot(None, settings.broker.broker_name) if slave and controlled else None
                    eventbridge = None
                    if not slave:
                        eventbridge = await _start_eventbridge(
                            settings, broker, parts_stack, gateway, eventbridge_cluster
                        )
                    elif controlled:
                        # Started for each term as master (master_doors); its HTTP API refuses meanwhile.
                        eventbridge = _eventbridge_runtime(settings, broker, parts_stack, None)
                    views: list[Parts | AdminContext] = []
                    if settings.http.enabled:
                        metrics = Metrics(Parts(broker, store, gateway, eventbridge, worker))
                        metrics.start()
                        parts_stack.push_async_callback(metrics.close)
                        admin = AdminContext(broker, store, report, gateway)
                        served = worker_slot if worker_slot is not None else worker
                        parts += await _start_http(settings, parts_stack, served, eventbridge, admin, metrics)
                        views = [metrics.collector.parts, admin]
                    if controlled and door is not None:
                        doors = master_doors(
                            settings, broker, tls, door, embedded_namesrv, views, eventbridge, worker_slot
                        )
                        failover = FailoverWiring(
                            settings.controller, settings.broker, broker, door.address, doors, ready,
                            door.registration.register_now if door.registration is not None else lambda: None,
                        )  # fmt: skip
                        parts_stack.push_async_callback(failover.close)
                        parts += await failover.start()
                    if not stop.is_set():
                        ready(format_ready(parts))
                        await stop.wait()
            finally:
                await broker.close()
        finally:
            log.info("closing store %s", settings.store.store_dir)
            await asyncio.to_thread(store.close)
            log.info("store closed")


def _eventbridge_runtime(
    settings: Settings, broker: Broker, stack: contextlib.AsyncExitStack, gateway: MqttGateway | None
) -> EventBridgeRuntime:
    """The runtime, not started (its HTTP client closed by `stack`)."""
    client = HttpTargetClient()
    stack.push_async_callback(client.close)
    return EventBridgeRuntime(
        broker,
        settings.data_dir / RULES_SUBDIR,
        client,
        mqtt=gateway,
        archives_dir=settings.data_dir / ARCHIVES_SUBDIR,
    )


async def _start_eventbridge(
    settings: Settings,
    broker: Broker,
    stack: contextlib.AsyncExitStack,
    gateway: MqttGateway | None,
    cluster: EventBridgeCluster | None,
) -> EventBridgeRuntime:
    """Start EventBridge: buses, the rules of DATA_DIR/rules and their targets, archives in
    DATA_DIR/eventbridge/archives. Closed by `stack` (targets first, then their HTTP client). MQTT targets publish
    through `gateway` (None: the gateway is off; they dead-letter). On a cluster (`cluster` joined), the rules are
    the cluster's and each target runs on one node."""
    runtime = _eventbridge_runtime(settings, broker, stack, gateway)
    await runtime.start(cluster)
    stack.push_async_callback(runtime.close)
    for error in runtime.errors:
        log.error("rule file refused: %s", error)
    return runtime


async def _start_http(
    settings: Settings,
    stack: contextlib.AsyncExitStack,
    worker: Worker | WorkerSlot | None,
    eventbridge: EventBridgeRuntime | None,
    admin: AdminContext,
    metrics: Metrics,
) -> list[str]:
    """Start the HTTP port with the routes of every HTTP API and `GET /metrics`; return its ready-line part. Closed
    by `stack`."""
    config = settings.http
    # The admin users' passwords are the MQTT users' file (read again here: the gateway may be off).
    password_file = settings.mqtt.password_file
    passwords = PasswordFile.load(password_file) if config.admin_users and password_file else None
    app = build_app(config, passwords)
    add_admin_routes(app, admin)
    add_admin_message_routes(app)
    add_dashboard_routes(app)
    if worker is not None:
        add_connector_routes(app, worker)
    if eventbridge is not None:
        add_eventbridge_routes(app, eventbridge)
        add_replay_routes(app, eventbridge)
    add_metrics_routes(app, metrics)
    server = HttpServer(app, config)
    try:
        address = await server.start()
    except OSError as exc:
        raise cannot_listen("http", "port", "--http-port", config.host, config.port, listen_reason(exc)) from None
    stack.push_async_callback(server.close)
    secured = config.token is not None or bool(config.admin_users)
    log.info("HTTP port on %s%s", address, " (token or admin user required)" if secured else "")
    if not secured and not _is_loopback(config.host):
        log.warning(
            "HTTP port on %s serves its admin and connector APIs to anyone who reaches it: set [http] token or"
            " admin_users, or bind [http] host to 127.0.0.1",
            address,
        )
    return [f"http={address}"]


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"
