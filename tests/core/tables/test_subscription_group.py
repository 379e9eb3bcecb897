import asyncio
import json
import re
import threading

import pytest

from core.errors import ConfigFileError, GroupConfigError, GroupNotFoundError
from core.tables.subscription_group import SubscriptionGroupConfig, SubscriptionGroupManager, validate_group


def test_defaults_are_rocketmq_defaults():
    config = SubscriptionGroupConfig("GID_a")
    assert config.to_json() == {
        "groupName": "GID_a",
        "consumeEnable": True,
        "consumeFromMinEnable": True,
        "consumeBroadcastEnable": True,
        "consumeMessageOrderly": False,
        "retryQueueNums": 1,
        "retryMaxTimes": 16,
        "groupRetryPolicy": {
            "type": "CUSTOMIZED",
            "customizedRetryPolicy": {
                "next": [
                    1000,
                    5000,
                    10000,
                    30000,
                    *(m * 60_000 for m in range(1, 11)),
                    1200000,
                    1800000,
                    3600000,
                    7200000,
                ]
            },
        },
    }


def test_json_round_trip_and_unknown_rocketmq_members_are_ignored():
    config = SubscriptionGroupConfig("g", consume_enable=False, retry_queue_nums=0, retry_max_times=3)
    assert SubscriptionGroupConfig.from_json(config.to_json()) == config
    rocketmq_entry = {**config.to_json(), "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1, "groupSysFlag": 0}
    assert SubscriptionGroupConfig.from_json(rocketmq_entry) == config


@pytest.mark.parametrize("name", ["GID_a", "%RETRY%x", "a|b-c", "g" * 255])
def test_legal_group_names(name):
    assert validate_group(name) == name


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"group_name": ""}, "empty"),
        ({"group_name": "a@b"}, "'@' is not allowed"),
        ({"group_name": "g" * 256}, "at most 255"),
        ({"group_name": "g", "retry_queue_nums": -1}, "retryQueueNums is -1; use an integer from 0 to 1024"),
        ({"group_name": "g", "retry_queue_nums": 1025}, "retryQueueNums is 1025"),
        ({"group_name": "g", "retry_max_times": -1}, "retryMaxTimes is -1"),
        ({"group_name": "g", "consume_enable": "yes"}, "consumeEnable is 'yes'"),
    ],
)
def test_validation_says_what_is_wrong(kwargs, message):
    with pytest.raises(GroupConfigError, match=message):
        SubscriptionGroupConfig(**kwargs)


def test_create_update_delete_and_reload(tmp_path):
    manager = SubscriptionGroupManager(tmp_path, auto_create=False)
    manager.create_or_update(SubscriptionGroupConfig("b"))
    manager.create_or_update(SubscriptionGroupConfig("a", consume_message_orderly=True))
    manager.create_or_update(SubscriptionGroupConfig("a", consume_message_orderly=True))  # no change, no write
    assert manager.data_version.counter == 2
    assert [g.group_name for g in manager.list()] == ["a", "b"]
    assert manager.delete("b") is True and manager.delete("b") is False
    assert manager.data_version.counter == 3

    reloaded = SubscriptionGroupManager(tmp_path, auto_create=False)
    assert reloaded.list() == [SubscriptionGroupConfig("a", consume_message_orderly=True)]
    assert reloaded.data_version == manager.data_version
    on_disk = json.loads((tmp_path / "subscriptionGroup.json").read_text())
    assert on_disk["subscriptionGroupTable"]["a"]["consumeMessageOrderly"] is True


def test_auto_create_is_on_by_default(tmp_path):
    manager = SubscriptionGroupManager(tmp_path)
    assert manager.get_or_auto_create("GID_new") == SubscriptionGroupConfig("GID_new")
    assert SubscriptionGroupManager(tmp_path).get("GID_new") == SubscriptionGroupConfig("GID_new")


def test_auto_create_off_says_how_to_create(tmp_path):
    manager = SubscriptionGroupManager(tmp_path, auto_create=False)
    with pytest.raises(GroupNotFoundError, match="'g' does not exist and autoCreateSubscriptionGroup is off"):
        manager.get_or_auto_create("g")
    with pytest.raises(GroupConfigError, match="'/' is not allowed"):
        SubscriptionGroupManager(tmp_path).get_or_auto_create("a/b")
    assert not (tmp_path / "subscriptionGroup.json").exists()


async def test_concurrent_auto_creation_happens_once(tmp_path):
    manager = SubscriptionGroupManager(tmp_path)
    go = threading.Event()
    thread_results = []

    def from_thread():
        go.wait()
        thread_results.append(manager.get_or_auto_create("GID_hot"))

    threads = [threading.Thread(target=from_thread) for _ in range(32)]
    for thread in threads:
        thread.start()
    tasks = [asyncio.create_task(manager.get_or_auto_create_async("GID_hot")) for _ in range(200)]
    go.set()
    results = [*await asyncio.gather(*tasks)]
    for thread in threads:
        await asyncio.to_thread(thread.join)
    results += thread_results
    assert len(results) == 232
    assert all(result is results[0] for result in results)
    assert manager.data_version.counter == 1
    assert not (tmp_path / "subscriptionGroup.json.bak").exists()


def test_malformed_file_is_refused(tmp_path):
    (tmp_path / "subscriptionGroup.json").write_text('{"subscriptionGroupTable": {"g": {"groupName": "g",}}}')
    with pytest.raises(ConfigFileError, match="line 1 column 52: Expecting property name"):
        SubscriptionGroupManager(tmp_path)


def test_invalid_entry_is_refused_with_its_key(tmp_path):
    table = {"subscriptionGroupTable": {"g": {"groupName": "g", "retryMaxTimes": -5}}}
    (tmp_path / "subscriptionGroup.json").write_text(json.dumps(table))
    with pytest.raises(
        ConfigFileError, match=r"subscriptionGroupTable\['g'\]: consumer group 'g': retryMaxTimes is -5"
    ):
        SubscriptionGroupManager(tmp_path)


def test_group_retry_policies_load_as_rocketmq_writes_them():
    from core import GroupRetryPolicy, RetryPolicyType

    customized = {
        "groupName": "g",
        "groupRetryPolicy": {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 3000]}},
    }
    policy = SubscriptionGroupConfig.from_json(customized).retry_policy
    assert policy == GroupRetryPolicy(RetryPolicyType.CUSTOMIZED, next_ms=(1000, 3000))
    assert [policy.delay_ms(a) for a in (1, 2, 3)] == [1000, 3000, 3000]
    exponential = {
        "groupName": "g",
        "groupRetryPolicy": {
            "type": "EXPONENTIAL",
            "exponentialRetryPolicy": {"initial": 100, "max": 1000, "multiplier": 3},
        },
    }
    policy = SubscriptionGroupConfig.from_json(exponential).retry_policy
    assert [policy.delay_ms(a) for a in (1, 2, 3, 4)] == [100, 300, 900, 1000]
    assert (
        SubscriptionGroupConfig.from_json(SubscriptionGroupConfig("g", retry_policy=policy).to_json()).retry_policy
        == policy
    )


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ({"type": "LINEAR"}, "use CUSTOMIZED or EXPONENTIAL"),
        ({"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": []}}, "non-empty list of milliseconds"),
        ({"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, -1]}}, "non-empty list of milliseconds"),
        ({"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 10, "max": 5}}, "initial at most max"),
        ({"type": "EXPONENTIAL", "exponentialRetryPolicy": {"multiplier": 0}}, "use 1 or more"),
    ],
)
def test_a_bad_group_retry_policy_is_refused_with_the_group_named(policy, message):
    with pytest.raises(GroupConfigError, match=rf"consumer group 'g'.*{re.escape(message)}"):
        SubscriptionGroupConfig.from_json({"groupName": "g", "groupRetryPolicy": policy})
