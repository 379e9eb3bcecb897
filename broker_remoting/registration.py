"""The broker's registration with its NameServers (RocketMQ's BrokerOuterAPI.registerBrokerAll): REGISTER_BROKER
103 to each, every REGISTER_INTERVAL_S and soon after the topic table changes; UNREGISTER_BROKER 104 at close.

The body is RegisterBrokerBody's JSON: every topic's read and write queue counts, permissions and flags, with a data
version that changes with the table. While the broker auto-creates topics it also registers TBW102, the template
clients route a send to when the NameServer knows no topic of that name (RocketMQ's
AUTO_CREATE_TOPIC_KEY_TOPIC), with read, write and inherit permissions. A NameServer that cannot be reached is
logged and asked again at the next round; the others are not held up. A slave learns its master from the replies
(its remoting and HA addresses), and registers every NO_MASTER_INTERVAL_S while they name none.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from core import Broker, TopicConfig
from remoting.channel import RemotingTimeoutError
from remoting.client import RemotingClient
from remoting.codes import RequestCode, ResponseCode
from remoting.command import RemotingCommand
from remoting.errors import RemotingError

log = logging.getLogger(__name__)

# RocketMQ's broker registers every 30 s (registerNameServerPeriod) and waits 6 s for each answer
# (registerBrokerTimeoutMills); a NameServer drops a broker not heard for 120 s.
REGISTER_INTERVAL_S = 30.0
REGISTER_TIMEOUT_S = 6.0
# How often a slave registers while the NameServers name no master of its group.
NO_MASTER_INTERVAL_S = 3.0
AUTO_CREATE_TEMPLATE = "TBW102"
# PermName: READ 4 | WRITE 2 | INHERIT 1, as RocketMQ gives TBW102.
_TEMPLATE_PERM = 7


def topic_json(config: TopicConfig) -> dict[str, Any]:
    return {
        "topicName": config.topic_name,
        "readQueueNums": config.read_queue_nums,
        "writeQueueNums": config.write_queue_nums,
        "perm": int(config.perm),
        "topicFilterType": config.topic_filter_type.value,
        "topicSysFlag": config.topic_sys_flag,
        "order": config.order,
        "attributes": {"message.type": config.message_type.value},  # RocketMQ 5's TopicConfig.attributes
    }


class BrokerRegistration:
    def __init__(self, broker: Broker, address: str, namesrv_addresses: Sequence[str]) -> None:
        self._broker = broker
        self._address = address
        self._namesrv_addresses = list(namesrv_addresses)
        self._client = RemotingClient()
        self._changed = asyncio.Event()
        self._counter = 0
        self._rounds_started = 0
        self._rounds_done = 0
        self._round_done = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self.registered = asyncio.Event()  # set once every NameServer has answered a registration
        self.master_address: str | None = None  # a slave's master's remoting address, as the NameServers name it
        self.master_changed: Callable[[], None] = lambda: None

    def start(self) -> None:
        if not self._namesrv_addresses:
            return
        loop = asyncio.get_running_loop()

        def changed() -> None:  # in whichever thread changed the topic table
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._changed.set)

        self._broker.add_topic_listener(changed)
        self._task = loop.create_task(self._run())

    async def close(self) -> None:
        self._closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            await asyncio.gather(*(self._unregister(address) for address in self._namesrv_addresses))
        async with self._round_done:
            self._round_done.notify_all()  # a change waiting for its round is answered
        await self._client.close()

    async def _run(self) -> None:
        while not self._closing:
            self._changed.clear()
            self._counter += 1
            self._rounds_started += 1
            answers = await asyncio.gather(*(self._register(address) for address in self._namesrv_addresses))
            if all(answers):
                self.registered.set()
            async with self._round_done:
                self._rounds_done = self._rounds_started
                self._round_done.notify_all()
            # asyncio.timeout, not wait_for: Python 3.11's wait_for swallows a cancel that comes as the event is set
            # (a topic created at start), and close would wait for the next round.
            # A slave that knows no master yet asks again soon: its master may be starting beside it.
            waiting = self._broker_id() != 0 and self.master_address is None
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(NO_MASTER_INTERVAL_S if waiting else REGISTER_INTERVAL_S):
                    await self._changed.wait()

    def _broker_id(self) -> int:
        return self._broker.ha.nameserver_id(self._broker.config.broker_id)

    async def registered_now(self) -> None:
        """Register at once and return when that round has been answered (or has failed): RocketMQ's broker
        registers a changed topic before it answers UPDATE_AND_CREATE_TOPIC, so a client that asks the NameServer
        for the route next finds it. A NameServer that does not answer holds this at most REGISTER_TIMEOUT_S."""
        if self._task is None or self._task.done():
            return
        target = self._rounds_started + 1  # a round under way may have read the table before the change
        self._changed.set()
        async with self._round_done:
            await self._round_done.wait_for(lambda: self._rounds_done >= target or self._closing)

    def register_now(self) -> None:
        """Register again at once (the broker's role changed under automatic failover)."""
        self._changed.set()

    def body(self) -> bytes:
        table = {config.topic_name: topic_json(config) for config in self._broker.topic_configs()}
        broker_config = self._broker.config
        if broker_config.auto_create_topic and AUTO_CREATE_TEMPLATE not in table:
            nums = broker_config.default_queue_nums
            table[AUTO_CREATE_TEMPLATE] = {
                "topicName": AUTO_CREATE_TEMPLATE, "readQueueNums": nums, "writeQueueNums": nums,
                "perm": _TEMPLATE_PERM, "topicFilterType": "SINGLE_TAG", "topicSysFlag": 0, "order": False,
            }  # fmt: skip
        wrapper = {
            "topicConfigTable": table,
            "dataVersion": {"timestamp": time.time_ns() // 1_000_000, "counter": self._counter},
        }
        return json.dumps({"topicConfigSerializeWrapper": wrapper, "filterServerList": []}).encode()

    def _header(self) -> dict[str, str]:
        ha_port = self._broker.ha.port
        ha_address = f"{self._address.rpartition(':')[0]}:{ha_port}" if ha_port is not None else ""
        return {
            "brokerAddr": self._address,
            "brokerName": self._broker.config.broker_name,
            "brokerId": str(self._broker_id()),
            "clusterName": self._broker.config.cluster_name,
            "haServerAddr": ha_address,
            "compressed": "false",
        }

    async def _register(self, address: str) -> bool:
        request = RemotingCommand(RequestCode.REGISTER_BROKER, ext_fields=self._header(), body=self.body())
        try:
            reply = await self._client.invoke(address, request, REGISTER_TIMEOUT_S)
        except (RemotingError, RemotingTimeoutError) as exc:
            log.warning("registering with NameServer %s failed: %s; again in %.0f s", address, exc, REGISTER_INTERVAL_S)
            return False
        if reply.code != ResponseCode.SUCCESS:
            log.warning("NameServer %s refused the registration: %s (code %d)", address, reply.remark, reply.code)
            return False
        # A slave learns its master from the reply (RocketMQ's RegisterBrokerResult): its remoting address, for the
        # slave's copies of topics, groups and offsets, and its HA address, to follow its log.
        master = reply.ext_fields.get("masterAddr") or None
        if self._broker_id() == 0:
            self.master_address = None  # elected master under automatic failover: it follows nobody
        elif master != self.master_address:
            log.info("NameServer %s names the master of broker group %s: %s", address,
                     self._broker.config.broker_name, master or "none")  # fmt: skip
            self.master_address = master
            self.master_changed()
        ha_address = reply.ext_fields.get("haServerAddr")
        if ha_address:
            self._broker.ha.follow_master(ha_address)
        return True

    async def _unregister(self, address: str) -> None:
        registered = self._header()
        header = {key: registered[key] for key in ("brokerAddr", "brokerName", "brokerId", "clusterName")}
        with contextlib.suppress(RemotingError, OSError):
            await self._client.invoke(
                address, RemotingCommand(RequestCode.UNREGISTER_BROKER, ext_fields=header), REGISTER_TIMEOUT_S
            )
