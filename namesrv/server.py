"""The NameServer's request codes on a remoting server (RocketMQ's DefaultRequestProcessor), and the scan that
removes brokers gone silent.

    REGISTER_BROKER 103           ext: clusterName, brokerName, brokerAddr, brokerId, haServerAddr
                                  [heartbeatTimeoutMillis]; body: RegisterBrokerBody's JSON (the topic config
                                  table and its data version). Reply ext: masterAddr, haServerAddr.
    UNREGISTER_BROKER 104         ext: brokerName, brokerAddr, brokerId
    BROKER_HEARTBEAT 904          ext: brokerAddr
    GET_ROUTEINFO_BY_TOPIC 105    ext: topic; body: TopicRouteData's JSON, or TOPIC_NOT_EXIST
    GET_BROKER_CLUSTER_INFO 106   body: ClusterInfo's JSON
    GET_KV_CONFIG 101             ext: namespace, key; ext value, or QUERY_NOT_FOUND
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER 206, GET_TOPICS_BY_CLUSTER 224 (ext: cluster): body {"topicList": [...]}

A body or header mqgate cannot read is answered SYSTEM_ERROR (as RocketMQ's processor answers an exception) with
what was wrong. A compressed registration body (RocketMQ 4's `compressed=true`, a deflated layout of its own) is
refused so: brokers register with JSON, as mqgate's brokers do.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from namesrv.route_table import BROKER_TIMEOUT_MS, QueueData, RouteTable
from remoting.channel import Channel, RequestHandler
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingRequestError
from remoting.server import RemotingServer

log = logging.getLogger(__name__)

# RocketMQ's NameServer scans for silent brokers every 5 s (scanNotActiveBrokerInterval).
SCAN_INTERVAL_S = 5.0
# The KV namespace whose entries are order-topic configs, sent with routes (NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG).
ORDER_TOPIC_CONFIG = "ORDER_TOPIC_CONFIG"


class RequestError(RemotingRequestError):
    """A request the NameServer cannot read: answered SYSTEM_ERROR with this message (by the remoting server)."""


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


class NameServer:
    def __init__(self, clock_ms: Callable[[], int] = _now_ms) -> None:
        self.routes = RouteTable()
        self.kv: dict[str, dict[str, str]] = {}
        self._clock_ms = clock_ms
        self.server = RemotingServer("namesrv")
        self.server.add_close_listener(self._channel_closed)
        handlers = {
            RequestCode.REGISTER_BROKER: self._register_broker,
            RequestCode.UNREGISTER_BROKER: self._unregister_broker,
            RequestCode.BROKER_HEARTBEAT: self._broker_heartbeat,
            RequestCode.GET_ROUTEINFO_BY_TOPIC: self._route,
            RequestCode.GET_BROKER_CLUSTER_INFO: self._cluster_info,
            RequestCode.GET_KV_CONFIG: self._kv_config,
            RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: self._all_topics,
            RequestCode.GET_TOPICS_BY_CLUSTER: self._cluster_topics,
        }
        for code, handler in handlers.items():
            self.server.register(code, _async(handler))
        self._scan: asyncio.Task[None] | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on HOST:PORT (0: a free port); the port."""
        await self.server.start(host, port)
        self._scan = asyncio.get_running_loop().create_task(self._scan_every(SCAN_INTERVAL_S))
        return self.server.port

    async def close(self) -> None:
        if self._scan is not None:
            self._scan.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._scan
        await self.server.close()

    async def _scan_every(self, interval_s: float) -> None:
        while True:
            await asyncio.sleep(interval_s)
            for address in self.routes.expire(self._clock_ms()):
                log.warning("namesrv: broker %s not heard for its timeout: removed from the routes", address)

    def _channel_closed(self, channel: Channel) -> None:
        for address in self.routes.channel_closed(channel):
            log.info("namesrv: broker %s's connection closed: removed from the routes", address)

    # --- brokers ---

    def _register_broker(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        cluster, name, address = _field(ext, "clusterName"), _field(ext, "brokerName"), _field(ext, "brokerAddr")
        broker_id = _int(ext, "brokerId")
        if ext.get("compressed", "false").lower() == "true":
            raise RequestError("compressed registration bodies are not read by mqgate; register with compressed=false")
        topics, data_version = _registration_body(request.body)
        timeout = _int(ext, "heartbeatTimeoutMillis") if ext.get("heartbeatTimeoutMillis") else BROKER_TIMEOUT_MS
        registered = self.routes.register(
            cluster, name, address, broker_id, ext.get("haServerAddr", ""), topics, data_version, self._clock_ms(),
            channel, timeout,
        )  # fmt: skip
        reply_ext = {"masterAddr": registered.master_address, "haServerAddr": registered.ha_server_address}
        order = self.kv.get(ORDER_TOPIC_CONFIG)
        body = json.dumps({"table": order}).encode() if order else b""
        return request.reply(ResponseCode.SUCCESS, ext_fields=reply_ext, body=body)

    def _unregister_broker(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        ext = request.ext_fields
        self.routes.unregister(_field(ext, "brokerName"), _field(ext, "brokerAddr"), _int(ext, "brokerId"))
        return request.reply(ResponseCode.SUCCESS)

    def _broker_heartbeat(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        self.routes.heard(_field(request.ext_fields, "brokerAddr"), self._clock_ms())
        return request.reply(ResponseCode.SUCCESS)

    # --- clients ---

    def _route(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        topic = _field(request.ext_fields, "topic")
        route = self.routes.route(topic)
        if route is None:
            return request.reply(
                ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {topic}"
            )
        order = self.kv.get(ORDER_TOPIC_CONFIG, {}).get(topic)
        if order is not None:
            route["orderTopicConf"] = order
        return request.reply(ResponseCode.SUCCESS, body=_json(route))

    def _cluster_info(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.reply(ResponseCode.SUCCESS, body=_json(self.routes.cluster_info()))

    def _kv_config(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        namespace, key = _field(request.ext_fields, "namespace"), _field(request.ext_fields, "key")
        value = self.kv.get(namespace, {}).get(key)
        if value is None:
            return request.reply(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {namespace} Key: {key}")
        return request.reply(ResponseCode.SUCCESS, ext_fields={"value": value})

    def _all_topics(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.reply(ResponseCode.SUCCESS, body=_json({"topicList": self.routes.topic_names()}))

    def _cluster_topics(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        names = self.routes.topic_names(_field(request.ext_fields, "cluster"))
        return request.reply(ResponseCode.SUCCESS, body=_json({"topicList": names}))


def _async(handler: Callable[[Channel, RemotingCommand], RemotingCommand]) -> RequestHandler:
    async def answer(channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return handler(channel, request)

    return answer


def _json(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def _field(ext: dict[str, str], name: str) -> str:
    value = ext.get(name)
    if not value:
        raise RequestError(f"the request has no {name}")
    return value


def _int(ext: dict[str, str], name: str) -> int:
    text = _field(ext, name)
    try:
        return int(text)
    except ValueError:
        raise RequestError(f"{name} {text!r} is not an integer") from None


def _registration_body(body: bytes) -> tuple[dict[str, QueueData], Any]:
    """The topics and data version of a RegisterBrokerBody (an empty body: none)."""
    if not body:
        return {}, None
    try:
        data = json.loads(body)
        wrapper = data.get("topicConfigSerializeWrapper", data)  # the wrapper alone, as older brokers sent it
        table = wrapper.get("topicConfigTable") or {}
        topics = {
            str(name): QueueData(
                int(config["readQueueNums"]),
                int(config["writeQueueNums"]),
                int(config.get("perm", 6)),
                int(config.get("topicSysFlag", 0)),
            )
            for name, config in table.items()
        }
        return topics, wrapper.get("dataVersion")
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise RequestError(f"registration body is not a RegisterBrokerBody: {type(exc).__name__}: {exc}") from None
