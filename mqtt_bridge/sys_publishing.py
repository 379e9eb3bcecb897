"""Publishing the `$SYS/broker/...` tree (sys_tree.py computes it) every `[mqtt] sys_interval` seconds.

The values are kept in memory and sent straight to the connected subscriptions that match, at QoS 0; a new
subscription gets the current ones as retained messages (subscriptions.py). They are not stored in the core, as
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
import time

from mqtt_bridge.acl_file import Access
from mqtt_bridge.gateway_state import GatewayState, log, now_ms
from mqtt_bridge.message_mapping import MqttMessage
from mqtt_bridge.sys_tree import BrokerFigures


class SysPublishing(GatewayState):
    def start_sys(self) -> None:
        """Publish the tree now, then every sys_interval seconds until `stop_sys` (not at all when it is 0)."""
        if self.config.sys_interval:
            self._sys_task = asyncio.get_running_loop().create_task(self._publish_sys_every(self.config.sys_interval))

    async def stop_sys(self) -> None:
        if self._sys_task is not None:
            self._sys_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sys_task

    async def _publish_sys_every(self, interval_s: int) -> None:
        while True:
            try:
                self.publish_sys(time.monotonic())
            except Exception:  # a bug here must not end the updates for good
                log.exception("$SYS update failed")
            await asyncio.sleep(interval_s)

    def sys_figures(self) -> BrokerFigures:
        subscriptions = shared = 0
        for session in self.sessions.values():
            subscriptions += len(session.subscriptions)
            shared += sum(1 for sub in session.subscriptions.values() if sub.share_group is not None)
        traffic = self.traffic
        return BrokerFigures(
            clients_connected=len(self.links),
            sessions=len(self.sessions),
            subscriptions=subscriptions,
            shared_subscriptions=shared,
            retained=len(self.retained.entries),
            cached_messages=len(self.messages),
            cached_bytes=self.messages.bytes,
            packets_received=traffic.packets_received,
            packets_sent=traffic.packets_sent,
            publishes_received=traffic.publishes_received,
            publishes_sent=traffic.publishes_sent,
            publishes_dropped=self.stats["dropped"],
            bytes_received=traffic.bytes_received,
            bytes_sent=traffic.bytes_sent,
            sockets=traffic.sockets,
            connects=traffic.connects,
        )

    def publish_sys(self, now_s: float) -> None:
        """One update: what changed becomes the topics' retained value and goes to the subscriptions that match."""
        changed = self.sys_tree.update(now_s, self.sys_figures())
        now = now_ms()
        flush: set[str] = set()
        for topic, payload in changed.items():
            message = MqttMessage(topic, payload.encode(), 0, True)
            self.sys_messages[topic] = message
            self.sys_topics.add(topic)
            # Each connected session once, whatever the number of its filters that match (subscription ids: all).
            receivers: dict[str, tuple[list[int], bool]] = {}
            for topic_filter, queue, _ in self.trie.match(topic):
                if queue in self.shared:
                    continue
                for client_id in self.readers.get(queue, ()):
                    link = self.links.get(client_id)
                    sub = link.session.subscriptions.get(topic_filter) if link and link.session else None
                    if sub is not None:
                        ids, retain = receivers.get(client_id, ([], False))
                        if sub.subscription_id is not None:
                            ids.append(sub.subscription_id)
                        receivers[client_id] = (ids, retain or sub.retain_as_published)
            for client_id, (ids, retain) in receivers.items():
                link = self.links[client_id]
                if link.writable and self.allowed(link, topic, Access.READ):
                    # A live update: retain flag 0 unless retain-as-published ([MQTT-3.3.1-9]); QoS 0, dropped for a
                    # connection that takes no more for now.
                    link.conn.publish(message.to_publish(0, retain, None, now, ids))
                    flush.add(client_id)
        for client_id in flush:
            self.links[client_id].flush()
