"""A slave's copies of its master's tables (RocketMQ's SlaveSynchronize): topics, subscription groups, consumer
offsets, delay-level and timer progress, taken every 10 s by whoever asks the master (the remoting door), so that the
slave serves reads with the master's topics and offsets, and holds what a later takeover needs.

Topics and groups are the master's: the slave's tables become copies of them. Offsets are merged, not copied.
RocketMQ's slave overwrites its offsets with the master's, so offsets that consumers committed to the slave
while the master was down go back to the master's older ones when it returns, and consumers that start again read
those messages a second time (apache/rocketmq#1094). Here an offset committed on the slave (`committed_here`) is
kept while it is ahead of the master's, and given back to the master (`ahead_of_master`, which the door sends with
"keep the larger"), until the master holds it or more; an offset the slave never took a commit for follows the
master's, back as well as forward (an administrator's reset on the master reaches the slave).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol, TypeVar

from core.scheduling.delay_levels import ScheduleService
from core.scheduling.timers import TimerService
from core.tables.consumer_offsets import ConsumerOffsetManager
from core.tables.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager
from core.tables.topic_config import TopicConfig, TopicConfigManager

log = logging.getLogger(__name__)

OffsetKey = tuple[str, str, int]  # (group, topic, queue id)
Config = TypeVar("Config")


class MasterCopy:
    def __init__(
        self,
        topics: TopicConfigManager,
        groups: SubscriptionGroupManager,
        offsets: ConsumerOffsetManager,
        schedule: ScheduleService,
        timers: TimerService,
    ) -> None:
        self._topics = topics
        self._groups = groups
        self._offsets = offsets
        self._schedule = schedule
        self._timers = timers
        self._lock = threading.Lock()
        # Offsets consumers committed to this slave, not yet known to be held by the master.
        self.committed_here: dict[OffsetKey, int] = {}

    def note_commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """A consumer committed `offset` to this slave (its master was down, or it reads here)."""
        with self._lock:
            self.committed_here[(group, topic, queue_id)] = offset

    def delay_offsets(self) -> dict[int, int]:
        """A master's delay-level progress, for its slaves: per level, the offset in its queue of the next message
        to move (RocketMQ's delayOffset.json)."""
        return self._schedule.offsets()

    def take_delay_offsets(self, offsets: dict[int, int]) -> None:
        """A slave keeps its master's delay-level progress (the service does not run on a slave)."""
        self._schedule.take_master_offsets(offsets)

    def timer_progress(self) -> dict[str, int]:
        """A master's timer progress, for its slaves (timerCheckpoint.json's content)."""
        return self._timers.progress()

    def take_timer_progress(self, progress: dict[str, int]) -> None:
        """A slave keeps its master's timer progress."""
        self._timers.take_master_progress(progress)

    def offset_given_back(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        """A master takes an offset a slave gives back (committed there while the master was away): forward only,
        so that a consumer's newer commit here is never overwritten."""
        if self._offsets.query_offset(group, topic, queue_id) < offset:
            self._offsets.commit_offset(group, topic, queue_id, offset)

    def take_topics(self, configs: Iterable[TopicConfig]) -> int:
        """Make the topic table the master's; the number of topics changed, added or removed."""
        return _mirror(self._topics, {config.topic_name: config for config in configs}, _topic_name)

    def take_groups(self, configs: Iterable[SubscriptionGroupConfig]) -> int:
        """Make the subscription-group table the master's; the number of groups changed, added or removed."""
        return _mirror(self._groups, {config.group_name: config for config in configs}, _group_name)

    def take_offsets(self, masters: Mapping[OffsetKey, int]) -> list[tuple[str, str, int, int]]:
        """Merge the master's committed offsets in (see the module's docstring); return the offsets committed here
        that are ahead of the master's, as (group, topic, queue id, offset), to give back to it."""
        ahead = []
        with self._lock:
            for key, offset in list(self.committed_here.items()):
                if masters.get(key, -1) >= offset:
                    del self.committed_here[key]  # the master holds it (or more): follow the master again
                else:
                    ahead.append((*key, offset))
            kept = set(self.committed_here)
        for (group, topic, queue_id), offset in masters.items():
            if (group, topic, queue_id) not in kept and self._offsets.query_offset(group, topic, queue_id) != offset:
                self._offsets.commit_offset(group, topic, queue_id, offset)
        return ahead


class _Table(Protocol[Config]):
    """What the topic and subscription-group tables share: configs by name."""

    def get(self, name: str) -> Config | None: ...
    def create_or_update(self, config: Config) -> object: ...
    def list(self) -> list[Config]: ...
    def delete(self, name: str) -> object: ...


def _mirror(table: _Table[Config], theirs: Mapping[str, Config], name: Callable[[Config], str]) -> int:
    """Make `table` hold exactly `theirs`; the number of entries changed, added or removed."""
    changed = 0
    for key, config in theirs.items():
        if table.get(key) != config:
            table.create_or_update(config)
            changed += 1
    for config in table.list():
        if name(config) not in theirs:
            table.delete(name(config))
            changed += 1
    return changed


def _topic_name(config: TopicConfig) -> str:
    return config.topic_name


def _group_name(config: SubscriptionGroupConfig) -> str:
    return config.group_name


def parse_delay_offsets(table: Mapping[object, object]) -> dict[int, int]:
    """delayOffset.json's offsetTable ({level: offset}) by level."""
    offsets = {}
    for level, offset in table.items():
        number, value = int(str(level)), int(str(offset))
        if number < 1 or value < 0:
            raise ValueError(f"delay offset table entry {level!r}: {offset!r}: levels from 1, offsets from 0")
        offsets[number] = value
    return offsets


def parse_offset_table(table: Mapping[str, Mapping[object, object]]) -> dict[OffsetKey, int]:
    """ConsumerOffsetSerializeWrapper's offsetTable ({"topic@group": {queue id: offset}}) by (group, topic, queue)."""
    offsets: dict[OffsetKey, int] = {}
    for key, queues in table.items():
        topic, separator, group = str(key).partition("@")
        if not separator or not isinstance(queues, Mapping):
            raise ValueError(f"offset table entry {key!r}: expected 'topic@group' with a table of queue offsets")
        for queue_id, offset in queues.items():
            offsets[(group, topic, int(str(queue_id)))] = int(str(offset))
    return offsets
