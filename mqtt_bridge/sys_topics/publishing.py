"""Publishing the `$SYS/broker/...` tree (tree.py computes it) every `[mqtt] sys_interval` seconds.

The values are kept in memory and sent straight to the connected subscriptions that match, at QoS 0; a new
subscription gets the current ones as retained messages (retained.py). They are not stored in the core, as
`publish_from_server` would store them: with the default interval of 10 s that is several records a second in
the commit log for good, each through the send hooks and the retained-message snapshot, for values worthless
after the next update and rebuilt after a restart anyway. Mosquitto keeps its $SYS tree in memory as well, and
does not queue it for disconnected sessions either (QoS 0).

Shared subscriptions get no $SYS updates (they get no retained messages either: MQTT 5 4.8.2), and a filter
whose first level is a wildcard matches no `$SYS` topic (MQTT 4.7.2): `$SYS/#` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.metadata
import logging
import time

from mqtt_bridge.access.access_control import AccessControl
from mqtt_bridge.access.acl_file import Access
from mqtt_bridge.counters import GatewayCounters
from mqtt_bridge.message_cache import MessageCache
from mqtt_bridge.message_mapping import MqttMessage, now_ms
from mqtt_bridge.retained import RetainedMessages
from mqtt_bridge.sessions.session_table import SessionTable
from mqtt_bridge.subscriptions import Subscriptions
from mqtt_bridge.sys_topics.tree import BrokerFigures, SysTree

log = logging.getLogger("mqtt_bridge.gateway")


def _version() -> str:
    try:
        return importlib.metadata.version("mqgate")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was not installed
        return "unknown"


class SysPublishing:
    def __init__(
        self,
        interval_s: int,
        access: AccessControl,
        sessions: SessionTable,
        subscriptions: Subscriptions,
        retained: RetainedMessages,
        cache: MessageCache,
        counters: GatewayCounters,
    ) -> None:
        self.interval_s = interval_s
        self.access = access
        self.sessions = sessions
        self.subscriptions = subscriptions
        self.retained = retained
        self.cache = cache
        self.counters = counters
        self.tree = SysTree(_version(), time.monotonic())
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Publish the tree now, then every interval_s seconds until `stop` (not at all when it is 0)."""
        if self.interval_s:
            self._task = asyncio.get_running_loop().create_task(self._publish_every(self.interval_s))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _publish_every(self, interval_s: int) -> None:
        while True:
            try:
                self.publish(time.monotonic())
            except Exception:  # a bug here must not end the updates for good
                log.exception("$SYS update failed")
            await asyncio.sleep(interval_s)

    def figures(self) -> BrokerFigures:
        subscriptions = shared = 0
        sessions = self.sessions.sessions
        for session in sessions.values():
            subscriptions += len(session.subscriptions)
            shared += sum(1 for sub in session.subscriptions.values() if sub.share_group is not None)
        counters = self.counters
        traffic = counters.traffic
        return BrokerFigures(
            clients_connected=len(self.sessions.links),
            sessions=len(sessions),
            subscriptions=subscriptions,
            shared_subscriptions=shared,
            retained=len(self.retained),
            cached_messages=len(self.cache),
            cached_bytes=self.cache.bytes,
            packets_received=traffic.packets_received,
            packets_sent=traffic.packets_sent,
            publishes_received=traffic.publishes_received,
            publishes_sent=traffic.publishes_sent,
            publishes_dropped=counters.dropped,
            bytes_received=traffic.bytes_received,
            bytes_sent=traffic.bytes_sent,
            sockets=traffic.sockets,
            connects=traffic.connects,
        )

    def publish(self, now_s: float) -> None:
        """One update: what changed becomes the topics' retained value and goes to the subscriptions that match."""
        changed = self.tree.update(now_s, self.figures())
        now = now_ms()
        links = self.sessions.links
        readers = self.subscriptions.readers
        shared = self.subscriptions.shared
        flush: set[str] = set()
        for topic, payload in changed.items():
            message = MqttMessage(topic, payload.encode(), 0, True)
            self.retained.set_sys(message)
            # Each connected session once, whatever the number of its filters that match (subscription ids: all).
            receivers: dict[str, tuple[list[int], bool]] = {}
            for topic_filter, queue, _ in self.subscriptions.trie.match(topic):
                if queue in shared:
                    continue
                for client_id in readers.get(queue, ()):
                    link = links.get(client_id)
                    sub = link.session.subscriptions.get(topic_filter) if link and link.session else None
                    if sub is not None:
                        ids, retain = receivers.get(client_id, ([], False))
                        if sub.subscription_id is not None:
                            ids.append(sub.subscription_id)
                        receivers[client_id] = (ids, retain or sub.retain_as_published)
            for client_id, (ids, retain) in receivers.items():
                link = links[client_id]
                if link.writable and self.access.allowed(link, topic, Access.READ):
                    # A live update: retain flag 0 unless retain-as-published ([MQTT-3.3.1-9]); QoS 0, dropped for a
                    # connection that takes no more for now.
                    link.conn.publish(message.to_publish(0, retain, None, now, ids))
                    flush.add(client_id)
        for client_id in flush:
            links[client_id].flush()
