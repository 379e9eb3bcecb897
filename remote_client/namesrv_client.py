"""The NameServers a client lists, asked as RocketMQ's clients ask them: one at a time, the same one until it fails,
then the next that answers (NettyRemotingClient's namesrv choice). NameServers are independent of each other; any
of them knows every broker that registers with all of them.

    route(topic)        GET_ROUTEINFO_BY_TOPIC 105: the TopicRoute, or None for TOPIC_NOT_EXIST
    cluster_info()      GET_BROKER_CLUSTER_INFO 106: ClusterInfo's JSON
    topic_names()       GET_ALL_TOPIC_LIST_FROM_NAMESERVER 206
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from core import ServiceNotAvailableError
from remote_client.replies import check
from remote_client.topic_route import TopicRoute, parse_route
from remoting.channel import ChannelClosedError, RemotingTimeoutError
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingError
from remoting.java_json import loads

log = logging.getLogger(__name__)

# RocketMQ's clients wait 3 s for a NameServer (MQClientAPIImpl's route timeout is the client's 3000 ms).
NAMESRV_TIMEOUT_S = 3.0


def parse_namesrv_addr(value: str | Sequence[str]) -> list[str]:
    """NameServer addresses from RocketMQ's `"HOST:PORT;HOST:PORT"` or a list."""
    entries = value.split(";") if isinstance(value, str) else list(value)
    addresses = [entry.strip() for entry in entries if entry.strip()]
    if not addresses:
        raise ValueError("no NameServer address given: name one as HOST:PORT")
    for address in addresses:
        host, colon, port = address.rpartition(":")
        if not colon or not host or not port.isdigit():
            raise ValueError(f"NameServer address {address!r} is not HOST:PORT")
    return addresses


class NameServers:
    def __init__(self, addresses: Sequence[str], remoting: RemotingClient, timeout_s: float = NAMESRV_TIMEOUT_S):
        self.addresses = list(addresses)
        self._remoting = remoting
        self._timeout_s = timeout_s
        self._current = 0

    @property
    def current(self) -> str:
        return self.addresses[self._current]

    async def invoke(self, request: RemotingCommand) -> RemotingCommand:
        """The reply of the first NameServer that answers, starting with the one that answered last."""
        failures = []
        for step in range(len(self.addresses)):
            index = (self._current + step) % len(self.addresses)
            address = self.addresses[index]
            try:
                reply = await self._remoting.invoke(address, request, self._timeout_s)
            except (ChannelClosedError, RemotingTimeoutError, RemotingError, OSError) as exc:
                failures.append(f"{address}: {exc}")
                continue
            if index != self._current:
                log.info("NameServer %s does not answer; asking %s", self.current, address)
                self._current = index
            return reply
        raise ServiceNotAvailableError(f"no NameServer answers ({'; '.join(failures)})")

    async def route(self, topic: str) -> TopicRoute | None:
        reply = await self.invoke(RemotingCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, ext_fields={"topic": topic}))
        if reply.code == ResponseCode.TOPIC_NOT_EXIST:
            return None
        check(reply, f"NameServer {self.current}")
        return parse_route(topic, reply.body)

    async def cluster_info(self) -> dict[str, Any]:
        reply = check(
            await self.invoke(RemotingCommand(RequestCode.GET_BROKER_CLUSTER_INFO)), f"NameServer {self.current}"
        )
        data: dict[str, Any] = loads(reply.body) if reply.body else {}
        return data

    async def topic_names(self) -> list[str]:
        reply = check(
            await self.invoke(RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)),
            f"NameServer {self.current}",
        )
        data = loads(reply.body) if reply.body else {}
        return sorted(str(name) for name in data.get("topicList") or ())
