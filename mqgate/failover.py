"""Automatic failover in `mqgate serve` ([controller] etcd_endpoints, docs/cluster.md): the controller's agent
(controller.agent) runs beside the remoting port, and the doors that write (MQTT, the gRPC endpoint, EventBridge and
the connectors: mqgate.terms) run while this broker is its group's master: started when it is elected, stopped
before it follows another; a door that cannot start then is tried again every DOORS_RETRY_S.

The ready line comes once the controller has named the broker's role, with `role=master` or `role=slave`; each
later change is a line of its own on standard output, `role=master epoch=N mqtt=HOST:PORT grpc=HOST:PORT` or
`role=slave epoch=N master=ID`. A door's port is the configured one; with 0, the port its first term got, again
when free.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from controller.agent import AgentSettings, FailoverAgent
from controller.config import ControllerConfig
from core import Broker, BrokerConfig, BrokerRole

log = logging.getLogger(__name__)

# How often the wait for the controller's first word is logged.
WAITING_LOG_S = 10.0
# The agent's look at etcd.
TICK_S = 0.5
# How long an elected broker whose doors could not start waits before it tries again.
DOORS_RETRY_S = 5.0

StartDoors = Callable[[contextlib.AsyncExitStack], Awaitable[list[str]]]


class FailoverWiring:
    def __init__(
        self,
        config: ControllerConfig,
        broker_config: BrokerConfig,
        broker: Broker,
        address: str,
        start_doors: StartDoors,
        announce: Callable[[str], None],
        registered_again: Callable[[], None],
    ) -> None:
        self.broker = broker
        self.start_doors = start_doors
        self.announce = announce
        self.registered_again = registered_again
        host = address.rpartition(":")[0]
        ha_port = broker.store.replication.master.address[1] if broker.store.replication.master is not None else 0
        settings = AgentSettings(
            broker_config.cluster_name, broker_config.broker_name, broker_config.broker_id, address,
            f"{host}:{ha_port}", sync=broker_config.broker_role is BrokerRole.SYNC_MASTER,
            lease_ttl_s=config.lease_ttl_s, tick_s=TICK_S, allow_unclean=config.enable_elect_unclean_master,
            max_not_caught_up_s=config.ha_max_time_slave_not_catchup_ms / 1000,
        )  # fmt: skip
        self._changed = asyncio.Event()
        self.agent = FailoverAgent(list(config.etcd_endpoints), settings, broker.ha, self._changed.set)
        self._doors: contextlib.AsyncExitStack | None = None
        self._door_parts: list[str] = []
        self._watcher: asyncio.Task[None] | None = None

    async def start(self) -> list[str]:
        """Start the agent and wait for its first word: the ready line's parts (the role, a master's doors)."""
        await self.agent.start()
        while not self.agent.decided.is_set():
            log.info("waiting for the controller (etcd %s) to name this broker's role",
                     ", ".join(self.agent.endpoints))  # fmt: skip
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(WAITING_LOG_S):
                    await self.agent.decided.wait()
        await self._apply()
        self._watcher = asyncio.get_running_loop().create_task(self._watch())
        return self._role_parts()

    def _role_parts(self) -> list[str]:
        if self._doors is not None:
            return ["role=master", f"epoch={self.agent.epoch}", *self._door_parts]
        return ["role=slave", f"epoch={self.agent.epoch}", f"master={self.agent.master_id}"]

    async def _watch(self) -> None:
        while True:
            await self._changed.wait()
            try:
                changed = await self._apply()
            except Exception as exc:
                # A door of the term that cannot start (its port taken meanwhile, say): the broker stays master, its
                # writing doors closed, and tries again, rather than serve on with no watcher of its role.
                log.error("the doors of this term as master could not start (%s); trying again in %.0f s",
                          exc, DOORS_RETRY_S)  # fmt: skip
                await asyncio.sleep(DOORS_RETRY_S)
                self._changed.set()
                continue
            if changed:
                self.announce(" ".join(self._role_parts()))

    async def _apply(self) -> bool:
        """Start or stop the doors as the role now is; whether anything changed."""
        self._changed.clear()
        self.registered_again()
        master = self.broker.ha.role is not BrokerRole.SLAVE
        if master and self._doors is None:
            stack = contextlib.AsyncExitStack()
            try:
                self._door_parts = await self.start_doors(stack)
            except BaseException:
                await stack.aclose()
                raise
            self._doors = stack
            return True
        if not master and self._doors is not None:
            stack, self._doors, self._door_parts = self._doors, None, []
            await stack.aclose()
            return True
        return not master  # a slave told to follow: its master or epoch may be new

    async def close(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
        await self.agent.close()
        if self._doors is not None:
            await self._doors.aclose()
            self._doors = None
