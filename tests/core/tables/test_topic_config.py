import asyncio
import json
import threading

import pytest

from core.errors import ConfigFileError, TopicConfigError, TopicNotFoundError
from core.tables.topic_config import MessageType, Perm, TopicConfig, TopicConfigManager, TopicFilterType


def test_perm_bits_are_rocketmq_perm_name():
    assert (Perm.PERM_PRIORITY, Perm.READ, Perm.WRITE, Perm.INHERIT) == (8, 4, 2, 1)
    assert TopicConfig("t").perm == Perm.READ | Perm.WRITE == 6


def test_json_is_rocketmq_topics_json_shape():
    config = TopicConfig("TopicTest", 8, 4, Perm.READ, MessageType.FIFO, True, (("x", "1"),))
    assert config.to_json() == {
        "topicName": "TopicTest",
        "readQueueNums": 8,
        "writeQueueNums": 4,
        "perm": 4,
        "topicFilterType": "SINGLE_TAG",
        "topicSysFlag": 0,
        "order": True,
        "attributes": {"x": "1", "message.type": "FIFO"},
    }
    assert TopicConfig.from_json(config.to_json()) == config


def test_rocketmq4_entry_without_attributes_loads_as_normal():
    entry = {"topicName": "old", "readQueueNums": 16, "writeQueueNums": 16, "perm": 7, "topicFilterType": "MULTI_TAG"}
    config = TopicConfig.from_json(entry)
    assert config.message_type is MessageType.NORMAL
    assert config.perm == Perm.READ | Perm.WRITE | Perm.INHERIT
    assert config.topic_filter_type is TopicFilterType.MULTI_TAG
    assert (config.read_queue_nums, config.write_queue_nums, config.attributes) == (16, 16, ())


def test_attributes_are_sorted_and_hashable():
    a = TopicConfig("t", attributes=(("b", "2"), ("a", "1")))
    b = TopicConfig("t", attributes=(("a", "1"), ("b", "2")))
    assert a == b and hash(a) == hash(b)
    assert a.attributes == (("a", "1"), ("b", "2"))
    assert a.attribute_map == {"a": "1", "b": "2"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"topic_name": "a/b"}, "'/' is not allowed"),
        ({"topic_name": ""}, "empty"),
        ({"topic_name": "t", "read_queue_nums": 0}, "readQueueNums is 0; use an integer from 1 to 1024"),
        ({"topic_name": "t", "write_queue_nums": 1025}, "writeQueueNums is 1025"),
        ({"topic_name": "t", "read_queue_nums": True}, "readQueueNums is True"),
        ({"topic_name": "t", "perm": 8}, "perm 8 is not valid"),
        ({"topic_name": "t", "perm": 16}, "perm 16 is not valid"),
        ({"topic_name": "t", "perm": -1}, "perm -1 is not valid"),
        ({"topic_name": "t", "attributes": (("message.type", "FIFO"),)}, "with message_type"),
        ({"topic_name": "t", "attributes": (("a", "1"), ("a", "2"))}, "'a' is given twice"),
        ({"topic_name": "t", "attributes": (("a", 1),)}, "pair of strings"),
        ({"topic_name": "t", "topic_sys_flag": -2}, "topicSysFlag is -2"),
    ],
)
def test_validation_says_what_is_wrong(kwargs, message):
    with pytest.raises(TopicConfigError, match=message):
        TopicConfig(**kwargs)


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"readQueueNums": 4}, "topicName is None"),
        ({"topicName": "t", "attributes": {"message.type": "ANY"}}, "message.type is 'ANY'; use one of NORMAL"),
        ({"topicName": "t", "topicFilterType": "X"}, "topicFilterType is 'X'"),
        ({"topicName": "t", "readQueueNums": "4"}, "readQueueNums is '4'"),
        ({"topicName": "t", "order": "yes"}, "order is 'yes'"),
    ],
)
def test_from_json_refuses_bad_entries(entry, message):
    with pytest.raises(TopicConfigError, match=message):
        TopicConfig.from_json(entry)


def test_create_get_list_and_reload(tmp_path):
    manager = TopicConfigManager(tmp_path, auto_create=False)
    assert manager.list() == [] and manager.data_version.counter == 0
    manager.create_or_update(TopicConfig("b", 2, 2))
    manager.create_or_update(TopicConfig("a", 8, 8, message_type=MessageType.DELAY))
    assert manager.get("a") == TopicConfig("a", 8, 8, message_type=MessageType.DELAY)
    assert manager.get("missing") is None
    assert [c.topic_name for c in manager.list()] == ["a", "b"]
    assert manager.data_version.counter == 2

    reloaded = TopicConfigManager(tmp_path, auto_create=False)
    assert reloaded.list() == manager.list()
    assert reloaded.data_version == manager.data_version
    on_disk = json.loads((tmp_path / "topics.json").read_text())
    assert set(on_disk) == {"topicConfigTable", "dataVersion"}
    assert on_disk["topicConfigTable"]["a"]["attributes"] == {"message.type": "DELAY"}
    assert on_disk["dataVersion"]["counter"] == 2


def test_unchanged_update_is_not_written(tmp_path):
    manager = TopicConfigManager(tmp_path, auto_create=False)
    manager.create_or_update(TopicConfig("a"))
    manager.create_or_update(TopicConfig("a"))
    assert manager.data_version.counter == 1
    assert not (tmp_path / "topics.json.bak").exists()
    manager.create_or_update(TopicConfig("a", 6, 6))
    assert manager.data_version.counter == 2
    assert manager.get("a") == TopicConfig("a", 6, 6)


def test_delete(tmp_path):
    manager = TopicConfigManager(tmp_path, auto_create=False)
    manager.create_or_update(TopicConfig("a"))
    manager.create_or_update(TopicConfig("b"))
    assert manager.delete("a") is True
    assert manager.delete("a") is False
    assert manager.get("a") is None
    assert manager.data_version.counter == 3
    assert [c.topic_name for c in TopicConfigManager(tmp_path, auto_create=False).list()] == ["b"]


def test_change_listeners_hear_each_change_once_it_is_readable(tmp_path):
    manager = TopicConfigManager(tmp_path, auto_create=True)
    heard: list[tuple[int, list[str]]] = []
    manager.add_change_listener(lambda: heard.append((manager.data_version.counter, manager_topics(manager))))
    manager.create_or_update(TopicConfig("a"))
    manager.create_or_update(TopicConfig("a"))  # unchanged: no write, nothing to hear
    manager.get_or_auto_create("b")
    manager.get_or_auto_create("b")
    manager.delete("a")
    manager.delete("a")
    assert heard == [(1, ["a"]), (2, ["a", "b"]), (3, ["b"])]


def manager_topics(manager: TopicConfigManager) -> list[str]:
    return [config.topic_name for config in manager.list()]


def test_auto_create_off_says_how_to_create(tmp_path):
    manager = TopicConfigManager(tmp_path, auto_create=False)
    with pytest.raises(TopicNotFoundError, match="topic 'x' does not exist and autoCreateTopicEnable is off; create"):
        manager.get_or_auto_create("x")
    assert not (tmp_path / "topics.json").exists()


def test_auto_create_uses_default_queue_count_and_refuses_bad_names(tmp_path):
    manager = TopicConfigManager(tmp_path, auto_create=True, default_queue_nums=3)
    config = manager.get_or_auto_create("orders")
    assert config == TopicConfig("orders", 3, 3)
    assert manager.get_or_auto_create("orders") is config
    with pytest.raises(TopicConfigError, match="'/' is not allowed"):
        manager.get_or_auto_create("a/b")
    assert [c.topic_name for c in manager.list()] == ["orders"]
    assert manager.data_version.counter == 1


def test_bad_default_queue_count_is_refused(tmp_path):
    with pytest.raises(TopicConfigError, match="default_queue_nums is 0"):
        TopicConfigManager(tmp_path, auto_create=True, default_queue_nums=0)


def _assert_created_once(tmp_path, manager, results, topic="hot"):
    assert len(results) > 0
    assert all(result is results[0] for result in results)
    assert results[0] == TopicConfig(topic, 4, 4)
    assert manager.data_version.counter == 1
    on_disk = json.loads((tmp_path / "topics.json").read_text())
    assert on_disk["dataVersion"]["counter"] == 1
    assert list(on_disk["topicConfigTable"]) == [topic]
    # A second write would have kept the first file as topics.json.bak.
    assert not (tmp_path / "topics.json.bak").exists()


def test_concurrent_auto_creation_from_threads_happens_once(tmp_path):
    manager = TopicConfigManager(tmp_path, auto_create=True)
    start = threading.Barrier(32)
    results = []
    errors = []

    def create():
        try:
            start.wait()
            results.append(manager.get_or_auto_create("hot"))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert len(results) == 32
    _assert_created_once(tmp_path, manager, results)


async def test_concurrent_auto_creation_from_tasks_and_threads_happens_once(tmp_path):
    manager = TopicConfigManager(tmp_path, auto_create=True)
    go = threading.Event()
    thread_results = []

    def from_thread():
        go.wait()
        thread_results.append(manager.get_or_auto_create("hot"))

    async def from_task(index):
        await asyncio.sleep(0)
        if index % 4 == 0:  # some tasks call the blocking method directly, as careless code would
            return manager.get_or_auto_create("hot")
        return await manager.get_or_auto_create_async("hot")

    threads = [threading.Thread(target=from_thread) for _ in range(32)]
    for thread in threads:
        thread.start()
    tasks = [asyncio.create_task(from_task(i)) for i in range(200)]
    go.set()
    task_results = await asyncio.gather(*tasks)
    for thread in threads:
        await asyncio.to_thread(thread.join)
    assert len(task_results) == 200 and len(thread_results) == 32
    _assert_created_once(tmp_path, manager, [*task_results, *thread_results])


def test_concurrent_creation_of_many_topics_counts_each_once(tmp_path):
    manager = TopicConfigManager(tmp_path, auto_create=True)
    topics = [f"t{i}" for i in range(10)]
    start = threading.Barrier(16)

    def create():
        start.wait()
        for topic in topics:
            manager.get_or_auto_create(topic)

    threads = [threading.Thread(target=create) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert manager.data_version.counter == len(topics)
    assert [c.topic_name for c in TopicConfigManager(tmp_path, auto_create=False).list()] == sorted(topics)


def test_failed_write_changes_nothing(tmp_path):
    config_dir = tmp_path / "config"
    manager = TopicConfigManager(config_dir, auto_create=True)
    config_dir.write_text("a file where the config directory should be")
    with pytest.raises(ConfigFileError, match="cannot be written") as failed:
        manager.get_or_auto_create("t")
    assert isinstance(failed.value.__cause__, OSError)
    assert manager.get("t") is None
    assert manager.data_version.counter == 0


def test_malformed_topics_json_is_refused(tmp_path):
    (tmp_path / "topics.json").write_text('{"topicConfigTable": {\n  "a": {"topicName": "a" "perm": 6}\n}}')
    with pytest.raises(ConfigFileError, match="line 2 column 26: Expecting ',' delimiter"):
        TopicConfigManager(tmp_path, auto_create=True)


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"a": {"topicName": "b"}}, r"topicConfigTable\['a'\] holds topicName 'b'"),
        ({"a": {"topicName": "a", "readQueueNums": 0}}, r"topicConfigTable\['a'\]: topic 'a': readQueueNums is 0"),
        ({"a": 5}, r"topicConfigTable\['a'\] must be an object"),
    ],
)
def test_invalid_entries_in_topics_json_are_refused(tmp_path, table, message):
    (tmp_path / "topics.json").write_text(json.dumps({"topicConfigTable": table}))
    with pytest.raises(ConfigFileError, match=message):
        TopicConfigManager(tmp_path, auto_create=True)


def test_rocketmq_topics_json_loads(tmp_path):
    rocketmq_file = {
        "dataVersion": {"counter": 7, "stateVersion": 0, "timestamp": 1700000000000},
        "topicConfigTable": {
            "TopicTest": {
                "attributes": {},
                "order": False,
                "perm": 6,
                "readQueueNums": 4,
                "topicFilterType": "SINGLE_TAG",
                "topicName": "TopicTest",
                "topicSysFlag": 0,
                "writeQueueNums": 4,
            }
        },
    }
    (tmp_path / "topics.json").write_text(json.dumps(rocketmq_file))
    manager = TopicConfigManager(tmp_path, auto_create=False)
    assert manager.get("TopicTest") == TopicConfig("TopicTest")
    assert (manager.data_version.counter, manager.data_version.timestamp) == (7, 1700000000000)
    manager.delete("TopicTest")
    assert manager.data_version.counter == 8


def test_a_mixed_topic_loads_as_rocketmq_5_writes_it():
    config = TopicConfig.from_json({"topicName": "t", "attributes": {"message.type": "MIXED"}})
    assert config.message_type is MessageType.MIXED
    assert TopicConfig.from_json(config.to_json()) == config
