"""A topic's route as a NameServer answers it (RocketMQ's TopicRouteData), and the queues a producer and a consumer
take from it (topicRouteData2TopicPublishInfo, topicRouteData2TopicSubscribeInfo). Pure code.

    queueDatas    one per broker group serving the topic: brokerName, readQueueNums, writeQueueNums, perm
    brokerDatas   one per broker group: cluster, brokerName, brokerAddrs {broker id: HOST:PORT}, 0 the master

A producer writes to the write queues of the groups that are writable and have a master, in broker-name order, so
that every client numbers them alike; a consumer reads the read queues of the readable groups. A Java NameServer
writes brokerAddrs with bare integer keys (fastjson: `{0:"10.0.0.7:10911"}`), which is not JSON:
remoting.java_json reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from core import MessageQueue
from remoting.java_json import JavaJsonError, loads

MASTER_ID = 0
# RocketMQ's PermName bits.
PERM_WRITE = 0x2
PERM_READ = 0x4


class RouteFormatError(ValueError):
    """A route body that is not a TopicRouteData."""


@dataclass(frozen=True, slots=True)
class QueueData:
    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)


@dataclass(frozen=True, slots=True)
class BrokerData:
    cluster: str
    broker_name: str
    addresses: dict[int, str] = field(default_factory=dict)  # broker id -> HOST:PORT

    @property
    def master(self) -> str | None:
        return self.addresses.get(MASTER_ID)


@dataclass(frozen=True, slots=True)
class TopicRoute:
    topic: str
    queue_datas: tuple[QueueData, ...]
    brokers: dict[str, BrokerData]

    def write_queues(self) -> list[MessageQueue]:
        """The queues a producer sends to: every writable group with a master, in broker-name order."""
        return [
            MessageQueue(self.topic, data.broker_name, queue_id)
            for data in sorted(self.queue_datas, key=lambda d: d.broker_name)
            if data.writable and self.master(data.broker_name) is not None
            for queue_id in range(data.write_queue_nums)
        ]

    def read_queues(self) -> list[MessageQueue]:
        """The queues consumers share: every readable group's, in broker-name order."""
        return [
            MessageQueue(self.topic, data.broker_name, queue_id)
            for data in sorted(self.queue_datas, key=lambda d: d.broker_name)
            if data.readable
            for queue_id in range(data.read_queue_nums)
        ]

    def master(self, broker_name: str) -> str | None:
        broker = self.brokers.get(broker_name)
        return broker.master if broker is not None else None

    def renamed(self, topic: str, max_queues: int) -> TopicRoute:
        """A template's route (TBW102) lent to a topic not created yet: each group with at most `max_queues` queues
        (RocketMQ's producer takes min(defaultTopicQueueNums, the template's) for both counts)."""
        datas = tuple(
            QueueData(data.broker_name, min(max_queues, data.read_queue_nums), min(max_queues, data.read_queue_nums),
                      data.perm)
            for data in self.queue_datas
        )  # fmt: skip
        return TopicRoute(topic, datas, self.brokers)

    def addresses(self) -> set[str]:
        """Every broker address the route names."""
        return {address for broker in self.brokers.values() for address in broker.addresses.values()}


def parse_route(topic: str, body: bytes) -> TopicRoute:
    """GET_ROUTEINFO_BY_TOPIC's body; RouteFormatError if it is not one."""
    try:
        data = loads(body)
        queue_datas = tuple(
            QueueData(
                str(item["brokerName"]),
                int(item["readQueueNums"]),
                int(item["writeQueueNums"]),
                int(item.get("perm", PERM_READ | PERM_WRITE)),
            )
            for item in data.get("queueDatas") or ()
        )
        brokers = {}
        for item in data.get("brokerDatas") or ():
            name = str(item["brokerName"])
            addresses = {int(key): str(value) for key, value in (item.get("brokerAddrs") or {}).items()}
            brokers[name] = BrokerData(str(item.get("cluster", "")), name, addresses)
    except (JavaJsonError, ValueError, TypeError, KeyError, AttributeError, UnicodeDecodeError) as exc:
        raise RouteFormatError(f"topic {topic!r}: the route is not a TopicRouteData: {exc}") from None
    return TopicRoute(topic, queue_datas, brokers)
