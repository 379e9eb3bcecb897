"""Consumer groups and the table that keeps them in `subscriptionGroup.json` (RocketMQ's SubscriptionGroupConfig
and SubscriptionGroupManager).

File layout, as RocketMQ's broker writes it (members RocketMQ has and we do not use, such as brokerId, are
ignored on load and not written back; groupRetryPolicy is core.retries.retry_policy's):

    {
        "subscriptionGroupTable": {
            "GID_orders": {
                "groupName": "GID_orders", "consumeEnable": true, "consumeFromMinEnable": true,
                "consumeBroadcastEnable": true, "consumeMessageOrderly": false,
                "retryQueueNums": 1, "retryMaxTimes": 16,
                "groupRetryPolicy": {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 5000]}}
            }
        },
        "dataVersion": {"timestamp": 1700000000000, "counter": 3}
    }
"""

from __future__ import annotations

import asyncio
import builtins
import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.errors import GroupConfigError, GroupNotFoundError
from core.retries.retry_policy import DEFAULT_RETRY_POLICY, GroupRetryPolicy
from core.store.topic_name import validate_name
from core.tables.config_table import ConfigTable
from core.tables.json_file import DataVersion
from core.tables.topic_config import MAX_QUEUE_NUMS

log = logging.getLogger(__name__)

SUBSCRIPTION_GROUP_FILE = "subscriptionGroup.json"
TABLE_KEY = "subscriptionGroupTable"
# RocketMQ's Validators.CHARACTER_MAX_LENGTH for group names.
MAX_GROUP_LENGTH = 255


def validate_group(group: str) -> str:
    """Return `group` if it is a legal consumer group name, else raise GroupConfigError saying what is wrong."""
    return validate_name("consumer group", group, MAX_GROUP_LENGTH, GroupConfigError)


def _member(data: Mapping[str, object], key: str, default: object) -> Any:
    # Typed Any on purpose: the constructor checks every value and names the member that is wrong.
    return data.get(key, default)


@dataclass(slots=True, frozen=True)
class SubscriptionGroupConfig:
    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    consume_message_orderly: bool = False
    # How long RocketMQ 5 push consumers wait after a failure (core.retries.retry_policy).
    retry_policy: GroupRetryPolicy = DEFAULT_RETRY_POLICY

    def __post_init__(self) -> None:
        validate_group(self.group_name)
        where = f"consumer group {self.group_name!r}"
        for name, flag in (
            ("consumeEnable", self.consume_enable),
            ("consumeFromMinEnable", self.consume_from_min_enable),
            ("consumeBroadcastEnable", self.consume_broadcast_enable),
            ("consumeMessageOrderly", self.consume_message_orderly),
        ):
            if not isinstance(flag, bool):
                raise GroupConfigError(f"{where}: {name} is {flag!r}; use true or false")
        retry_queues = self.retry_queue_nums
        # 0 retry queues is legal in RocketMQ: a message sent back for retry is then dropped.
        if (
            not isinstance(retry_queues, int)
            or isinstance(retry_queues, bool)
            or not 0 <= retry_queues <= MAX_QUEUE_NUMS
        ):
            raise GroupConfigError(
                f"{where}: retryQueueNums is {retry_queues!r}; use an integer from 0 to {MAX_QUEUE_NUMS}"
            )
        retry_times = self.retry_max_times
        if not isinstance(retry_times, int) or isinstance(retry_times, bool) or retry_times < 0:
            raise GroupConfigError(f"{where}: retryMaxTimes is {retry_times!r}; use a non-negative integer")

    def to_json(self) -> dict[str, object]:
        return {
            "groupName": self.group_name,
            "consumeEnable": self.consume_enable,
            "consumeFromMinEnable": self.consume_from_min_enable,
            "consumeBroadcastEnable": self.consume_broadcast_enable,
            "consumeMessageOrderly": self.consume_message_orderly,
            "retryQueueNums": self.retry_queue_nums,
            "retryMaxTimes": self.retry_max_times,
            "groupRetryPolicy": self.retry_policy.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, object]) -> SubscriptionGroupConfig:
        """Decode one entry of subscriptionGroupTable; a missing member takes its default. Raises GroupConfigError."""
        name = data.get("groupName")
        if not isinstance(name, str):
            raise GroupConfigError(f"groupName is {name!r}; every group entry needs its name as a string")
        defaults = cls(name)
        return cls(
            group_name=name,
            consume_enable=_member(data, "consumeEnable", defaults.consume_enable),
            consume_from_min_enable=_member(data, "consumeFromMinEnable", defaults.consume_from_min_enable),
            consume_broadcast_enable=_member(data, "consumeBroadcastEnable", defaults.consume_broadcast_enable),
            retry_queue_nums=_member(data, "retryQueueNums", defaults.retry_queue_nums),
            retry_max_times=_member(data, "retryMaxTimes", defaults.retry_max_times),
            consume_message_orderly=_member(data, "consumeMessageOrderly", defaults.consume_message_orderly),
            retry_policy=(
                GroupRetryPolicy.from_json(data["groupRetryPolicy"], f"consumer group {name!r}")
                if data.get("groupRetryPolicy") is not None
                else defaults.retry_policy
            ),
        )


class SubscriptionGroupManager:
    """The broker's consumer groups, kept in `config_dir/subscriptionGroup.json` (core.tables.config_table)."""

    def __init__(self, config_dir: Path, auto_create: bool = True) -> None:
        self.path = Path(config_dir) / SUBSCRIPTION_GROUP_FILE
        self.auto_create = auto_create
        self._table: ConfigTable[SubscriptionGroupConfig] = ConfigTable(
            self.path,
            TABLE_KEY,
            "groupName",
            lambda config: config.group_name,
            SubscriptionGroupConfig.from_json,
            GroupConfigError,
        )
        log.info(
            "loaded %d consumer groups from %s (data version %d)",
            len(self._table),
            self.path,
            self._table.data_version.counter,
        )

    @property
    def data_version(self) -> DataVersion:
        return self._table.data_version

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        return self._table.get(group)

    def list(self) -> builtins.list[SubscriptionGroupConfig]:
        """Every group, sorted by name."""
        return self._table.list()

    def create_or_update(self, config: SubscriptionGroupConfig) -> None:
        """Store `config`; a config equal to the current one changes nothing (no write, same data version)."""
        if self._table.put(config):
            log.info(
                "consumer group %r created or updated: retry max %d times over %d queues, consume %s%s",
                config.group_name,
                config.retry_max_times,
                config.retry_queue_nums,
                "enabled" if config.consume_enable else "disabled",
                ", orderly" if config.consume_message_orderly else "",
            )

    def delete(self, group: str) -> bool:
        """Remove `group`; False when it did not exist. Its offsets are ConsumerOffsetManager's to delete."""
        deleted = self._table.delete(group)
        if deleted:
            log.info("consumer group %r deleted", group)
        return deleted

    def get_or_auto_create(self, group: str) -> SubscriptionGroupConfig:
        """The group's configuration; a missing group is created with the defaults when auto-creation is on,
        exactly once however many threads ask at the same moment."""
        config = self._table.get(group)
        if config is not None:
            return config
        if not self.auto_create:
            raise GroupNotFoundError(
                f"consumer group {group!r} does not exist and autoCreateSubscriptionGroup is off; create it with "
                "the admin API (updateSubscriptionGroup / SubscriptionGroupManager.create_or_update) "
                "or turn autoCreateSubscriptionGroup on"
            )
        config, created = self._table.add_if_absent(SubscriptionGroupConfig(group))
        if created:
            log.info("consumer group %r auto-created", group)
        return config

    def create_missing(self, groups: Iterable[str]) -> int:
        """Create, with the defaults, those of `groups` that do not exist, in one write of the file, whatever
        auto-creation says (the caller owns them); the number created."""
        added = self._table.add_all_if_absent(SubscriptionGroupConfig(group) for group in groups)
        if added:
            log.info("%d consumer groups created (%s ...)", len(added), added[0])
        return len(added)

    async def get_or_auto_create_async(self, group: str) -> SubscriptionGroupConfig:
        """get_or_auto_create for the event loop: a creation (lock wait and fsync) runs in a worker thread."""
        config = self._table.get(group)
        if config is not None:
            return config
        return await asyncio.to_thread(self.get_or_auto_create, group)
