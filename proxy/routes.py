"""QueryRoute and QueryAssignment answers: a topic's queues as the proxy describes them (RouteActivity), for this one
endpoint. Pure code.

Routes: this endpoint is the only broker (`broker_name`, id 0), at the address the client used to reach it (the
request's `endpoints`, as the proxy's useEndpointPortFromRequest), or the address it listens on when the request
gives none. Queues are numbered read-only first, then write-only, then read-write, each with its permission, and
accept the topic's message type (all four for MIXED).

Assignments: a push consumer of a group that consumes concurrently gets one assignment per broker with queue id -1
(it receives from every queue of the topic); one of an orderly group gets one per readable queue, so that it keeps
a receive going per queue. No readable queue: FORBIDDEN, as the proxy answers.

On a cluster (proxy.cluster_view) every broker group's queues are named, each group at its own endpoint, and the
groups' queues are interleaved (a0, b0, a1, b1, ...): a client that takes the next queue after a send failed (the
official clients do) tries another group, not another queue of the group that failed.
"""

from __future__ import annotations

from itertools import chain, zip_longest

from core import MessageType as TopicMessageType
from core import Perm, TopicConfig
from proxy.status_codes import RequestError
from proxy.stubs import AddressScheme, Code, MessageType, Permission, definition_pb2

_ACCEPTS = {
    TopicMessageType.NORMAL: [MessageType.NORMAL],
    TopicMessageType.FIFO: [MessageType.FIFO],
    TopicMessageType.DELAY: [MessageType.DELAY],
    TopicMessageType.TRANSACTION: [MessageType.TRANSACTION],
    TopicMessageType.MIXED: [MessageType.NORMAL, MessageType.FIFO, MessageType.DELAY, MessageType.TRANSACTION],
}


def accepts(config: TopicConfig, message_type: int) -> bool:
    """Whether a topic takes a message of this type (RocketMQ's DefaultTopicMessageTypeValidator)."""
    return message_type in _ACCEPTS[config.message_type]


def permission_of(perm: Perm) -> int:
    readable, writable = bool(perm & Perm.READ), bool(perm & Perm.WRITE)
    if readable and writable:
        return Permission.READ_WRITE
    if readable:
        return Permission.READ
    return Permission.WRITE if writable else Permission.NONE


def broker_of(name: str, endpoints: definition_pb2.Endpoints) -> definition_pb2.Broker:
    return definition_pb2.Broker(name=name, id=0, endpoints=endpoints)


def endpoints_of(host: str, port: int) -> definition_pb2.Endpoints:
    scheme = AddressScheme.IPv6 if ":" in host else AddressScheme.IPv4
    return definition_pb2.Endpoints(scheme=scheme, addresses=[definition_pb2.Address(host=host, port=port)])


def interleaved(per_group: list[list[definition_pb2.MessageQueue]]) -> list[definition_pb2.MessageQueue]:
    """The groups' queues taken in turn: the first of each group, then the second of each, ..."""
    return [queue for queue in chain.from_iterable(zip_longest(*per_group)) if queue is not None]


def message_queues(config: TopicConfig, broker: definition_pb2.Broker) -> list[definition_pb2.MessageQueue]:
    topic = definition_pb2.Resource(name=config.topic_name)
    accepted = _ACCEPTS[config.message_type]
    readable, writable = bool(config.perm & Perm.READ), bool(config.perm & Perm.WRITE)
    reads, writes = config.read_queue_nums, config.write_queue_nums
    read_only = write_only = both = none = 0
    if readable and writable:
        both = min(reads, writes)
        read_only, write_only = reads - both, writes - both
    elif writable:
        write_only = writes
    elif readable:
        read_only = reads
    else:
        none = max(1, reads, writes)
    queues: list[definition_pb2.MessageQueue] = []
    for count, permission in (
        (read_only, Permission.READ),
        (write_only, Permission.WRITE),
        (both, Permission.READ_WRITE),
        (none, Permission.NONE),
    ):
        for _ in range(count):
            queues.append(
                definition_pb2.MessageQueue(
                    topic=topic,
                    id=len(queues),
                    permission=permission,
                    broker=broker,
                    accept_message_types=accepted,
                )
            )
    return queues


def readable(config: TopicConfig) -> bool:
    return bool(config.perm & Perm.READ) and config.read_queue_nums > 0


def assignments(config: TopicConfig, broker: definition_pb2.Broker, orderly: bool) -> list[definition_pb2.Assignment]:
    if not readable(config):
        raise RequestError(Code.FORBIDDEN, f"topic {config.topic_name!r} has no readable queue")
    topic = definition_pb2.Resource(name=config.topic_name)
    permission = permission_of(config.perm)
    ids = range(config.read_queue_nums) if orderly else [-1]
    return [
        definition_pb2.Assignment(
            message_queue=definition_pb2.MessageQueue(topic=topic, id=i, permission=permission, broker=broker)
        )
        for i in ids
    ]
