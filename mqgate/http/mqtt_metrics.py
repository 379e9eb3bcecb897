"""The MQTT gateway's metric families (for mqgate/http/metrics.py): connections, sessions, subscriptions, retained and
in-flight messages, and what the connections received and sent, read from the gateway at scrape time (Mosquitto's
$SYS tree holds the same figures; mqtt_bridge/sys_topics/tree.py publishes them over MQTT)."""

from __future__ import annotations

from collections.abc import Iterator

import mqtt5
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from mqtt_bridge.gateway import MqttGateway


def reason_name(code: int) -> str:
    """The MQTT 5 reason code's name in snake case (0x87 -> "not_authorized"), or its hex value if it has none."""
    try:
        return mqtt5.DisconnectReasonCode(code).name.lower()
    except ValueError:
        return f"0x{code:02x}"


def mqtt_families(gateway: MqttGateway) -> Iterator[Metric]:
    sessions = gateway.sessions
    subscriptions = inflight = 0
    for session in sessions.values():
        subscriptions += len(session.subscriptions)
        inflight += len(session.inflight)
    gauges = (
        ("mqgate_mqtt_connections", "Network connections open to the MQTT listeners", gateway.connection_count),
        ("mqgate_mqtt_clients_connected", "MQTT clients connected (CONNECT accepted)", len(gateway.sessions.links)),
        (
            "mqgate_mqtt_sessions",
            "MQTT sessions: the connected clients and the persistent sessions of disconnected ones",
            len(sessions),
        ),
        ("mqgate_mqtt_subscriptions", "Subscriptions of all sessions (shared ones included)", subscriptions),
        ("mqgate_mqtt_retained_messages", "Retained messages", len(gateway.retained)),
        (
            "mqgate_mqtt_cluster_groups",
            "Broker groups whose nodes run the MQTT gateway together (1: this one alone)",
            1 + len(gateway.membership.other_groups()),
        ),
        (
            "mqgate_mqtt_cluster_filters",
            "Subscription filters used by sessions on any node, each with a light queue on every group",
            len(gateway.membership.registry),
        ),
        (
            "mqgate_mqtt_inflight_messages",
            "QoS 1 and 2 messages sent to clients and not yet acknowledged (PUBACK, PUBCOMP)",
            inflight,
        ),
    )
    for name, documentation, value in gauges:
        yield GaugeMetricFamily(name, documentation, value=value)
    traffic = gateway.traffic
    counters = (
        ("mqgate_mqtt_messages_received", "PUBLISH packets received from clients", traffic.publishes_received),
        ("mqgate_mqtt_messages_sent", "PUBLISH packets sent to clients", traffic.publishes_sent),
        ("mqgate_mqtt_packets_received", "MQTT control packets received, of every type", traffic.packets_received),
        ("mqgate_mqtt_packets_sent", "MQTT control packets sent, of every type", traffic.packets_sent),
        ("mqgate_mqtt_received_bytes", "Bytes received on MQTT connections", traffic.bytes_received),
        ("mqgate_mqtt_sent_bytes", "Bytes sent on MQTT connections", traffic.bytes_sent),
    )
    for name, documentation, value in counters:
        yield CounterMetricFamily(name, documentation, value=value)
    remote = gateway.membership.remote
    reads = CounterMetricFamily(
        "mqgate_mqtt_remote_messages_read",
        "Messages sessions here read from other broker groups' light queues, by where they came from (kept: taken"
        " by this node's long poll; pulled: asked for by a session behind it)",
        labels=["source"],
    )
    reads.add_metric(["kept"], remote.hits if remote is not None else 0)
    reads.add_metric(["pulled"], remote.misses if remote is not None else 0)
    yield reads
