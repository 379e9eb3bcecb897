"""The NameServer's tables (RocketMQ's RouteInfoManager), without I/O: the clock is the caller's.

    clusters        cluster name -> its broker names
    brokers         broker name -> BrokerGroup: its cluster and its addresses by broker id (0 is the master)
    topics          topic -> broker name -> QueueData (read and write queue counts, permission, system flag)
    live            broker address -> LiveBroker: when it was last heard, its timeout, its data version, its HA
                    address and the connection it registered on

A master's registration sets its topics' queue data when its data version changed (or on its first): topics it no
longer lists leave its routes, so a topic deleted on the broker leaves them with its next registration (RocketMQ
5's deleteTopicWithBrokerRegistration; RocketMQ 4 waits for an explicit DELETE_TOPIC_IN_NAMESRV). A slave's
registration adds its address only. A broker not heard for its timeout (BROKER_TIMEOUT_MS unless it said another),
or whose connection closed, is removed; a broker group with no address left takes its queue data with it.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

MASTER_ID = 0
# RouteInfoManager.DEFAULT_BROKER_CHANNEL_EXPIRED_TIME: a broker registers every 30 s; four missed registrations.
BROKER_TIMEOUT_MS = 120_000


@dataclass(frozen=True, slots=True)
class QueueData:
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int = 0

    def to_json(self, broker_name: str) -> dict[str, Any]:
        return {
            "brokerName": broker_name,
            "readQueueNums": self.read_queue_nums,
            "writeQueueNums": self.write_queue_nums,
            "perm": self.perm,
            "topicSysFlag": self.topic_sys_flag,
        }


@dataclass(slots=True)
class BrokerGroup:
    cluster: str
    name: str
    addresses: dict[int, str] = field(default_factory=dict)  # broker id -> HOST:PORT

    def to_json(self) -> dict[str, Any]:
        # Broker ids as JSON object keys: quoted integers, {"0": master}, as every client reads them.
        return {
            "cluster": self.cluster,
            "brokerName": self.name,
            "brokerAddrs": {str(i): a for i, a in self.addresses.items()},
        }


@dataclass(slots=True)
class LiveBroker:
    cluster: str
    name: str
    broker_id: int
    last_heard_ms: int
    timeout_ms: int
    data_version: Any
    ha_server_address: str
    channel: Hashable | None


@dataclass(frozen=True, slots=True)
class Registered:
    """What a registration answers: the group's master and its HA address, for a slave to follow (empty for a
    master, or a slave whose master is not registered)."""

    master_address: str = ""
    ha_server_address: str = ""


@dataclass(slots=True)
class RouteTable:
    clusters: dict[str, set[str]] = field(default_factory=dict)
    brokers: dict[str, BrokerGroup] = field(default_factory=dict)
    topics: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    live: dict[str, LiveBroker] = field(default_factory=dict)

    def register(
        self,
        cluster: str,
        broker_name: str,
        address: str,
        broker_id: int,
        ha_server_address: str,
        topics: dict[str, QueueData],
        data_version: Any,
        now_ms: int,
        channel: Hashable | None = None,
        timeout_ms: int = BROKER_TIMEOUT_MS,
    ) -> Registered:
        self.clusters.setdefault(cluster, set()).add(broker_name)
        group = self.brokers.get(broker_name)
        if group is None:
            group = self.brokers[broker_name] = BrokerGroup(cluster, broker_name)
        # One address, one id: a slave promoted to master (or the reverse) comes back under its new id.
        for other_id, other in list(group.addresses.items()):
            if other == address and other_id != broker_id:
                del group.addresses[other_id]
        group.addresses[broker_id] = address
        previous = self.live.get(address)
        first = previous is None or previous.broker_id != broker_id
        if broker_id == MASTER_ID and (first or previous is None or previous.data_version != data_version):
            self._set_topics(broker_name, topics)
        self.live[address] = LiveBroker(
            cluster, broker_name, broker_id, now_ms, timeout_ms, data_version, ha_server_address, channel
        )
        if broker_id == MASTER_ID:
            return Registered()
        master = group.addresses.get(MASTER_ID)
        master_live = self.live.get(master) if master is not None else None
        if master is None or master_live is None:
            return Registered()
        return Registered(master, master_live.ha_server_address)

    def _set_topics(self, broker_name: str, topics: dict[str, QueueData]) -> None:
        for topic in list(self.topics):
            if topic not in topics:
                self._drop_topic_of(topic, broker_name)
        for topic, queues in topics.items():
            self.topics.setdefault(topic, {})[broker_name] = queues

    def _drop_topic_of(self, topic: str, broker_name: str) -> None:
        queues = self.topics.get(topic)
        if queues is not None and queues.pop(broker_name, None) is not None and not queues:
            del self.topics[topic]

    def heard(self, address: str, now_ms: int) -> bool:
        """A broker's heartbeat (BROKER_HEARTBEAT); False if it is not registered (it must register again)."""
        broker = self.live.get(address)
        if broker is None:
            return False
        broker.last_heard_ms = now_ms
        return True

    def unregister(self, broker_name: str, address: str, broker_id: int) -> bool:
        """Remove a broker that said it goes (UNREGISTER_BROKER); False if it was not registered."""
        broker = self.live.get(address)
        if broker is None or broker.name != broker_name or broker.broker_id != broker_id:
            return False
        self._remove(address)
        return True

    def expire(self, now_ms: int) -> list[str]:
        """Remove the brokers not heard for their timeout; their addresses."""
        gone = [address for address, broker in self.live.items() if now_ms - broker.last_heard_ms > broker.timeout_ms]
        for address in gone:
            self._remove(address)
        return gone

    def channel_closed(self, channel: Hashable) -> list[str]:
        """Remove the brokers that registered on a connection now closed; their addresses."""
        gone = [address for address, broker in self.live.items() if broker.channel is channel]
        for address in gone:
            self._remove(address)
        return gone

    def _remove(self, address: str) -> None:
        broker = self.live.pop(address)
        group = self.brokers.get(broker.name)
        if group is None:
            return
        if group.addresses.get(broker.broker_id) == address:
            del group.addresses[broker.broker_id]
        if group.addresses:
            return
        del self.brokers[broker.name]
        names = self.clusters.get(group.cluster)
        if names is not None:
            names.discard(broker.name)
            if not names:
                del self.clusters[group.cluster]
        for topic in list(self.topics):
            self._drop_topic_of(topic, broker.name)

    # --- what clients ask ---

    def route(self, topic: str) -> dict[str, Any] | None:
        """TopicRouteData's JSON for `topic`, None when no broker serves it (TOPIC_NOT_EXIST)."""
        queues = self.topics.get(topic)
        if not queues:
            return None
        names = sorted(queues)
        return {
            "queueDatas": [queues[name].to_json(name) for name in names],
            "brokerDatas": [self.brokers[name].to_json() for name in names if name in self.brokers],
            "filterServerTable": {},
        }

    def cluster_info(self) -> dict[str, Any]:
        """ClusterInfo's JSON (GET_BROKER_CLUSTER_INFO), and when each broker last registered or beat
        (`brokerLiveTable`, mqgate's: Java clients read ClusterInfo's two tables and skip it)."""
        return {
            "brokerAddrTable": {name: group.to_json() for name, group in sorted(self.brokers.items())},
            "clusterAddrTable": {cluster: sorted(names) for cluster, names in sorted(self.clusters.items())},
            "brokerLiveTable": {
                address: {"lastUpdateTimestamp": live.last_heard_ms, "timeoutMillis": live.timeout_ms}
                for address, live in sorted(self.live.items())
            },
        }

    def topic_names(self, cluster: str | None = None) -> list[str]:
        """Every topic (GET_ALL_TOPIC_LIST_FROM_NAMESERVER), or those of a cluster's brokers (GET_TOPICS_BY_CLUSTER)."""
        if cluster is None:
            return sorted(self.topics)
        names: Iterable[str] = self.clusters.get(cluster, ())
        members = set(names)
        return sorted(topic for topic, queues in self.topics.items() if members & queues.keys())
