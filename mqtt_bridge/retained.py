"""Retained messages: the last retained PUBLISH of every topic, kept in the core (state_records.py: changes are
core messages, with a snapshot) and read back after a restart, and the $SYS tree's current values, kept in memory
only (sys_topics/publishing.py). A new subscription gets those its filter matches (`queue_for`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from core import Broker, StateTable
from mqtt_bridge.link import Link
from mqtt_bridge.message_mapping import MqttMessage, now_ms
from mqtt_bridge.sessions.session import Subscription
from mqtt_bridge.sessions.state_records import RETAINED_QUEUE, retained_change, retained_json, retained_value
from mqtt_bridge.topics.topic_trie import TopicTree


class RetainedMessages:
    def __init__(self, broker: Broker, state_dir: Path) -> None:
        self.table: StateTable[MqttMessage] = StateTable(
            broker, RETAINED_QUEUE, Path(state_dir) / "retained.json", retained_change, retained_json, retained_value
        )
        self._topics = TopicTree()
        # The $SYS tree (sys_topics/publishing.py): its current values by topic, in memory only.
        self._sys_messages: dict[str, MqttMessage] = {}
        self._sys_topics = TopicTree()

    def __len__(self) -> int:
        return len(self.table.entries)

    @property
    def entries(self) -> dict[str, MqttMessage]:
        return self.table.entries

    async def load(self) -> None:
        await self.table.load()
        for topic in self.table.entries:
            self._topics.add(topic)

    def start(self) -> None:
        self.table.start()

    async def close(self) -> None:
        await self.table.close()

    def stored(self, message: MqttMessage) -> None:
        """A retained PUBLISH reached the log: it is its topic's retained message (an empty payload clears it)."""
        if message.payload:
            self.table.changed(message.topic, message)
            self._topics.add(message.topic)
        else:
            self.table.changed(message.topic, None)
            self._topics.discard(message.topic)

    def set_sys(self, message: MqttMessage) -> None:
        """A $SYS topic's current value."""
        self._sys_messages[message.topic] = message
        self._sys_topics.add(message.topic)

    def queue_for(self, link: Link, sub: Subscription, readable: Callable[[str], bool]) -> None:
        """Queue on `link` the retained messages (and $SYS values, at QoS 0) that a new subscription gets: those
        its filter matches, not expired, that the client may read."""
        now = now_ms()
        for topic in list(self._topics.matching(sub.topic_filter)):
            message = self.table.entries.get(topic)
            if message is None or (message.expires_at_ms is not None and message.expires_at_ms <= now):
                continue
            if not readable(topic):
                continue
            link.retained.append((message, min(sub.qos, message.qos), sub.subscription_id))
        for topic in self._sys_topics.matching(sub.topic_filter):
            sys_message = self._sys_messages.get(topic)
            if sys_message is not None and readable(topic):
                link.retained.append((sys_message, 0, sub.subscription_id))
