"""Replication over remoting: what a master tells its slaves, and the slave's copy of its master's tables
(RocketMQ's SlaveSynchronize), beside the HA link that copies the log (core.store.ha).

    GET_ALL_CONSUMER_OFFSET 43   body: ConsumerOffsetSerializeWrapper's JSON, {"offsetTable": {"topic@group":
                                 {queue id: offset}}}
    GET_ALL_DELAY_OFFSET 45      body: delayOffset.json's, {"offsetTable": {level: offset}}
    GET_TIMER_CHECK_POINT 60     body: timerCheckpoint.json's, {"firedThroughS": s, "scanFromOffset": n} (RocketMQ's
                                 code; its body is a binary TimerCheckpoint, mqgate's is this JSON)
    GET_BROKER_HA_STATUS 907     body: RocketMQ's HARuntimeInfo JSON: master, masterCommitLogMaxOffset,
                                 inSyncSlaveNums, haConnectionInfo (per slave: addr, slaveAckOffset, diff, inSync;
                                 mqgate adds lagSeconds), haClientRuntimeInfo (a slave's link: masterAddr,
                                 isActivated, lastReadTimestamp...)

A slave asks its master, every SYNC_INTERVAL_S, for its topics (GET_ALL_TOPIC_CONFIG), groups
(GET_ALL_SUBSCRIPTIONGROUP_CONFIG), committed offsets, delay-level and timer progress, and keeps them
(core.replication.master_copy): topics and groups as the master's, offsets merged so that none moves back. The
offsets that consumers committed to the slave while the master was away and that are ahead of the master's go back
to it as UPDATE_CONSUMER_OFFSET with `keepLarger=true` (mqgate's field: the master takes it only if it is ahead of
its own, so a consumer's newer commit on the master is never overwritten).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from typing import Any

from core import (
    Broker,
    BrokerRole,
    CoreError,
    SubscriptionGroupConfig,
    TopicConfig,
    parse_delay_offsets,
    parse_offset_table,
)
from remoting.channel import Channel, RemotingTimeoutError
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingError
from remoting.java_json import JavaJsonError, loads

log = logging.getLogger(__name__)

# RocketMQ's slave synchronizes topics, groups, offsets and delay progress every 10 s.
SYNC_INTERVAL_S = 10.0
REQUEST_TIMEOUT_S = 5.0


class ReplicationDoor:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    async def all_offsets(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        table: dict[str, dict[str, int]] = {}
        for group, topic, queue_id, offset in self._broker.committed_offsets():
            table.setdefault(f"{topic}@{group}", {})[str(queue_id)] = offset
        return request.reply(ResponseCode.SUCCESS, body=json.dumps({"offsetTable": table}).encode())

    async def all_delay_offsets(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        table = {str(level): offset for level, offset in sorted(self._broker.master_copy.delay_offsets().items())}
        return request.reply(ResponseCode.SUCCESS, body=json.dumps({"offsetTable": table}).encode())

    async def timer_progress(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.reply(ResponseCode.SUCCESS, body=json.dumps(self._broker.master_copy.timer_progress()).encode())

    async def ha_status(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        return request.reply(ResponseCode.SUCCESS, body=json.dumps(ha_status(self._broker)).encode())


def ha_status(broker: Broker) -> dict[str, Any]:
    """RocketMQ's HARuntimeInfo, as JSON."""
    replication = broker.ha.state()
    info: dict[str, Any] = {
        "master": broker.ha.role is not BrokerRole.SLAVE,
        "masterCommitLogMaxOffset": replication.log_end,
        "inSyncSlaveNums": sum(1 for slave in replication.slaves if slave.in_sync),
        "haConnectionInfo": [
            {
                "addr": slave.address,
                "slaveAckOffset": slave.acked_offset,
                "diff": slave.lag_bytes,
                "inSync": slave.in_sync,
                "lagSeconds": round(slave.lag_s, 3),
            }
            for slave in replication.slaves
        ],
    }
    master = replication.master
    if master is not None:
        heard_ms = int(time.time() * 1000 - master.last_heard_s * 1000) if master.last_heard_s is not None else 0
        info["haClientRuntimeInfo"] = {
            "masterAddr": master.address or "",
            "isActivated": master.connected,
            "lastReadTimestamp": heard_ms,
            "maxOffset": replication.log_end,
            "refused": master.refused or "",
            "localAddr": master.local_address or "",
        }
    return info


class SlaveSync:
    """A slave's copies of its master's tables, taken every SYNC_INTERVAL_S from `master_address()` (the master's
    remoting address, as the NameServers name it in their reply to this broker's registration)."""

    def __init__(self, broker: Broker, master_address: Callable[[], str | None]) -> None:
        self._broker = broker
        self._master_address = master_address
        self._client = RemotingClient()
        self._task: asyncio.Task[None] | None = None
        self.last_sync: float | None = None  # time.time() of the last whole copy
        self.wake = asyncio.Event()

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._client.close()

    async def _run(self) -> None:
        while True:
            address = self._master_address()
            # Under automatic failover this broker may be its group's master now: it copies from nobody.
            if address is not None and self._broker.ha.role is BrokerRole.SLAVE:
                try:
                    await self.sync_once(address)
                except (RemotingError, RemotingTimeoutError, OSError, CoreError, ValueError, JavaJsonError) as exc:
                    log.warning("slave: copying the tables of master %s failed: %s; again in %.0f s", address, exc,
                                SYNC_INTERVAL_S)  # fmt: skip
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SYNC_INTERVAL_S):
                    await self.wake.wait()

    async def sync_once(self, address: str) -> None:
        """Copy the master's topics, groups, offsets, delay and timer progress once; give back offsets ahead of
        its."""
        broker = self._broker
        copy = broker.master_copy
        topics = await self._ask(address, RequestCode.GET_ALL_TOPIC_CONFIG)
        changed = copy.take_topics(TopicConfig.from_json(entry) for entry in _table(topics, "topicConfigTable"))
        groups = await self._ask(address, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        changed += copy.take_groups(
            SubscriptionGroupConfig.from_json(entry) for entry in _table(groups, "subscriptionGroupTable")
        )
        offsets = await self._ask(address, RequestCode.GET_ALL_CONSUMER_OFFSET)
        ahead = copy.take_offsets(parse_offset_table(_mapping(offsets, "offsetTable")))
        delay = await self._ask(address, RequestCode.GET_ALL_DELAY_OFFSET)
        copy.take_delay_offsets(parse_delay_offsets(_mapping(delay, "offsetTable")))
        timers = await self._ask(address, RequestCode.GET_TIMER_CHECK_POINT)
        if isinstance(timers, dict) and timers:
            copy.take_timer_progress(timers)
        for group, topic, queue_id, offset in ahead:
            fields = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "commitOffset": str(offset),
                      "keepLarger": "true"}  # fmt: skip
            request = RemotingCommand(RequestCode.UPDATE_CONSUMER_OFFSET, ext_fields=fields)
            reply = await self._client.invoke(address, request, REQUEST_TIMEOUT_S)
            if reply.code != ResponseCode.SUCCESS:
                log.warning("slave: master %s refused offset %d of %s/%s queue %d: %s", address, offset, group,
                            topic, queue_id, reply.remark)  # fmt: skip
        if ahead:
            log.info("slave: gave master %s back %d offsets committed here while it was away", address, len(ahead))
        if changed:
            log.info("slave: %d topics and groups changed to match master %s", changed, address)
        self.last_sync = time.time()

    async def _ask(self, address: str, code: RequestCode) -> Any:
        reply = await self._client.invoke(address, RemotingCommand(code), REQUEST_TIMEOUT_S)
        if reply.code != ResponseCode.SUCCESS:
            raise RemotingError(f"{code.name}: the master answered {reply.code}: {reply.remark}")
        return loads(reply.body) if reply.body else {}


def _mapping(data: Any, key: str) -> dict[Any, Any]:
    value = data.get(key) if isinstance(data, dict) else None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{key}: expected a table, got {type(value).__name__}")
    return value


def _table(data: Any, key: str) -> list[dict[str, Any]]:
    return [entry for entry in _mapping(data, key).values() if isinstance(entry, dict)]
