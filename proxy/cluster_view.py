"""The broker groups that serve a topic, for the routes of a gRPC endpoint whose broker is one group of a cluster.

mqgate runs a gRPC endpoint in every broker process, on that broker, as RocketMQ 5's proxy in local mode: a route
names every group's queues, each group at its own endpoint, and clients send, receive and acknowledge at the
endpoint of the queue's group (nothing is forwarded between endpoints). The groups come from the NameServers
(through remote_client's Cluster, routes refreshed every 30 s); for each other group this view learns

- where its gRPC endpoint is: the `grpcEndpoint` its broker names in GET_BROKER_RUNTIME_INFO, else (a broker that
  does not name one) its broker's host with this endpoint's port, as RocketMQ's local mode assumes one gRPC port
  throughout the cluster;
- the topic's message type there: GET_TOPIC_CONFIG's `message.type` attribute (NORMAL when it has none).

Each is kept CACHE_S and asked again after. A topic the NameServers do not know, or NameServers that cannot be
reached, give None: the endpoint then answers from its own broker alone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from core import CoreError, MessageType, Perm, TopicConfig
from remote_client import Cluster
from remote_client.replies import check
from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.java_json import loads

log = logging.getLogger(__name__)

# As long as a client keeps a route (RocketMQ's clients query routes every 30 s).
CACHE_S = 30.0

Key = TypeVar("Key")
Value = TypeVar("Value")


class _Kept(Generic[Key, Value]):
    """Answers kept CACHE_S each, then asked again."""

    def __init__(self) -> None:
        self._answers: dict[Key, tuple[float, Value]] = {}  # key -> (until, answer)

    async def get(self, key: Key, ask: Callable[[Key], Awaitable[Value]]) -> Value:
        now = time.monotonic()
        known = self._answers.get(key)
        if known is not None and known[0] > now:
            return known[1]
        answer = await ask(key)
        self._answers[key] = (now + CACHE_S, answer)
        return answer


@dataclass(frozen=True, slots=True)
class GroupQueues:
    """One broker group's queues of a topic; `endpoint` None for this endpoint's own group."""

    config: TopicConfig
    broker_name: str
    endpoint: tuple[str, int] | None


class ClusterView:
    def __init__(self, cluster: Cluster, broker_name: str, own_port: Callable[[], int]) -> None:
        self.cluster = cluster
        self.broker_name = broker_name
        self._own_port = own_port
        self._endpoints: _Kept[str, tuple[str, int]] = _Kept()  # broker address -> endpoint
        self._types: _Kept[tuple[str, str], MessageType] = _Kept()  # (address, topic) -> type

    async def groups(self, topic: str) -> list[GroupQueues] | None:
        try:
            route = await self.cluster.route(topic)
        except CoreError as exc:
            log.debug("route of topic %r from the NameServers: %s; answering from this broker", topic, exc)
            return None
        groups = []
        for data in sorted(route.queue_datas, key=lambda d: d.broker_name):
            address = route.master(data.broker_name)
            if address is None:
                continue  # no master: nothing to send to or receive from
            if data.broker_name == self.broker_name:
                endpoint = None
                message_type = MessageType.NORMAL
            else:
                endpoint, message_type = await asyncio.gather(
                    self._endpoints.get(address, self._endpoint), self._types.get((address, topic), self._message_type)
                )
            config = TopicConfig(
                topic, data.read_queue_nums, data.write_queue_nums, Perm(data.perm & 6), message_type=message_type
            )
            groups.append(GroupQueues(config, data.broker_name, endpoint))
        return groups

    async def _endpoint(self, address: str) -> tuple[str, int]:
        host = address.rpartition(":")[0]
        endpoint = (host, self._own_port())
        try:
            reply = check(
                await self.cluster.invoke_address(address, RemotingCommand(RequestCode.GET_BROKER_RUNTIME_INFO)),
                f"broker {address}",
            )
            named = (loads(reply.body).get("table") or {}).get("grpcEndpoint")
            if named:
                named_host, _, port = str(named).rpartition(":")
                endpoint = (named_host, int(port))
        except (CoreError, ValueError) as exc:
            log.info("broker %s does not say where its gRPC endpoint is (%s): %s:%d assumed", address, exc, *endpoint)
        return endpoint

    async def _message_type(self, address_and_topic: tuple[str, str]) -> MessageType:
        address, topic = address_and_topic
        message_type = MessageType.NORMAL
        try:
            request = RemotingCommand(RequestCode.GET_TOPIC_CONFIG, ext_fields={"topic": topic})
            reply = check(await self.cluster.invoke_address(address, request), f"broker {address}")
            named = (loads(reply.body).get("attributes") or {}).get("message.type")
            if named:
                message_type = MessageType(named)
        except (CoreError, ValueError) as exc:
            log.info("broker %s does not say the message type of topic %r (%s): NORMAL assumed", address, topic, exc)
        return message_type
