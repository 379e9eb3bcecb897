"""What an operator sees of the gateway's clients (the admin API's `clients`, Mosquitto's and EMQX's client lists):
one ClientView per session, connected or kept for a persistent client that is away, with its subscriptions, the
messages in flight to it and those waiting in its queues. Read from the gateway's state; nothing changes."""

from __future__ import annotations

from dataclasses import dataclass

from mqtt_bridge.gateway import MqttGateway


@dataclass(slots=True, frozen=True)
class SubscriptionView:
    topic_filter: str
    qos: int
    share_group: str | None  # $share/GROUP/...: the group; None for a subscription of its own
    no_local: bool
    retain_as_published: bool


@dataclass(slots=True, frozen=True)
class ClientView:
    client_id: str
    connected: bool
    peer: str | None  # HOST:PORT while connected
    username: str | None
    protocol_version: int | None  # 4 (3.1.1) or 5 while connected
    keep_alive_s: int | None
    session_expiry_s: int  # 0: the session ends with the connection
    disconnected_at_ms: int | None
    subscriptions: tuple[SubscriptionView, ...]
    inflight: int  # QoS 1 and 2 messages sent and not acknowledged yet
    queued: int  # messages stored for its own subscriptions and not sent yet (shared ones are the group's)
    dropped: int  # deliveries given up as its queue ran past max_queued_messages
    node: str  # the broker group whose node holds the session (this one)


def client_views(gateway: MqttGateway) -> list[ClientView]:
    """Every session, sorted by client id."""
    broker = gateway.broker
    views = []
    for client_id, session in sorted(gateway.sessions.items()):
        link = gateway.sessions.links.get(client_id) if session.connected else None
        queued = 0
        for sub in session.subscriptions.values():
            if sub.share_group is None:
                read = session.read_offsets.get(sub.queue, -1)
                if read >= 0:
                    queued += max(0, broker.max_offset(sub.queue, 0) - read)
        views.append(
            ClientView(
                client_id=client_id,
                connected=link is not None,
                peer=link.peer if link is not None else None,
                username=link.username if link is not None else None,
                protocol_version=link.conn.version if link is not None else None,
                keep_alive_s=link.conn.keep_alive if link is not None else None,
                session_expiry_s=session.expiry_interval,
                disconnected_at_ms=session.disconnected_at_ms,
                subscriptions=tuple(
                    SubscriptionView(sub.topic_filter, sub.qos, sub.share_group, sub.no_local, sub.retain_as_published)
                    for _, sub in sorted(session.subscriptions.items())
                ),
                inflight=len(session.inflight),
                queued=queued,
                dropped=session.dropped,
                node=gateway.membership.group,
            )
        )
    return views


@dataclass(slots=True, frozen=True)
class FilterView:
    topic_filter: str
    share_group: str | None
    groups: tuple[str, ...]  # the broker groups whose nodes have sessions subscribed to it


@dataclass(slots=True, frozen=True)
class ClusterView:
    """What this node knows of the MQTT gateway on the cluster (docs/cluster.md, "MQTT on a cluster")."""

    group: str  # this node's broker group
    clustered: bool  # False: a gateway alone
    groups: tuple[str, ...]  # every group known, this one included
    sessions: dict[str, str]  # persistent sessions' client ids, by the group whose node holds each (its record)
    filters: tuple[FilterView, ...]


def cluster_view(gateway: MqttGateway) -> ClusterView:
    membership = gateway.membership
    sessions = {client_id: gateway.membership.group for client_id in gateway.sessions.sessions}
    for client_id, record in gateway.sessions.records.entries.items():
        if client_id not in sessions and isinstance(record.get("group"), str):
            sessions[client_id] = str(record["group"])
    return ClusterView(
        group=membership.group,
        clustered=membership.clustered,
        groups=tuple(sorted({membership.group, *membership.other_groups()})),
        sessions=dict(sorted(sessions.items())),
        filters=tuple(
            FilterView(use.topic_filter, use.share_group, tuple(sorted(use.groups)))
            for _, use in sorted(membership.registry.uses.items(), key=lambda item: (item[1].topic_filter, item[0]))
        ),
    )
