import json
import threading

import pytest

from core.errors import ConfigFileError, InvalidOffsetError
from core.tables.consumer_offsets import NO_OFFSET, ConsumerOffsetManager


def test_commit_query_persist_reload(tmp_path):
    offsets = ConsumerOffsetManager(tmp_path)
    assert offsets.query_offset("g", "T", 0) == NO_OFFSET == -1
    offsets.commit_offset("g", "T", 0, 12)
    offsets.commit_offset("g", "T", 1, 10)
    offsets.commit_offset("g", "T", 0, 13)
    offsets.commit_offset("h", "T", 0, 5)
    assert offsets.query_offset("g", "T", 0) == 13
    assert offsets.query_offset("g", "T", 7) == -1
    assert offsets.offsets_of("g", "T") == {0: 13, 1: 10}
    assert offsets.offsets_of("g", "other") == {}
    assert offsets.persist() is True

    on_disk = json.loads((tmp_path / "consumerOffset.json").read_text())
    assert on_disk == {"offsetTable": {"T@g": {"0": 13, "1": 10}, "T@h": {"0": 5}}}
    reloaded = ConsumerOffsetManager(tmp_path)
    assert reloaded.offsets_of("g", "T") == {0: 13, 1: 10}
    assert reloaded.query_offset("h", "T", 0) == 5


def test_offsets_of_returns_a_copy(tmp_path):
    offsets = ConsumerOffsetManager(tmp_path)
    offsets.commit_offset("g", "T", 0, 1)
    offsets.offsets_of("g", "T")[0] = 99
    assert offsets.query_offset("g", "T", 0) == 1


def test_persist_writes_only_after_a_change(tmp_path):
    offsets = ConsumerOffsetManager(tmp_path)
    assert offsets.persist() is False
    assert not (tmp_path / "consumerOffset.json").exists()
    offsets.commit_offset("g", "T", 0, 1)
    assert offsets.persist() is True
    assert offsets.persist() is False
    offsets.commit_offset("g", "T", 0, 1)  # the same offset again is no change
    assert offsets.persist() is False
    assert not (tmp_path / "consumerOffset.json.bak").exists()
    offsets.commit_offset("g", "T", 0, 2)
    assert offsets.persist() is True
    assert (tmp_path / "consumerOffset.json.bak").exists()


def test_load_drops_unpersisted_commits(tmp_path):
    offsets = ConsumerOffsetManager(tmp_path)
    offsets.commit_offset("g", "T", 0, 1)
    offsets.persist()
    offsets.commit_offset("g", "T", 0, 50)
    offsets.load()
    assert offsets.query_offset("g", "T", 0) == 1
    assert offsets.persist() is False


def test_offsets_may_move_back(tmp_path):
    offsets = ConsumerOffsetManager(tmp_path)
    offsets.commit_offset("g", "T", 0, 100)
    offsets.commit_offset("g", "T", 0, 40)
    assert offsets.query_offset("g", "T", 0) == 40


def test_reset_offsets_sets_the_named_queues(tmp_path):
    offsets = ConsumerOffsetManager(tmp_path)
    offsets.commit_offset("g", "T", 0, 100)
    offsets.commit_offset("g", "T", 1, 100)
    offsets.persist()
    offsets.reset_offsets("g", "T", {0: 0, 2: 7})
    assert offsets.offsets_of("g", "T") == {0: 0, 1: 100, 2: 7}
    assert offsets.persist() is True
    with pytest.raises(InvalidOffsetError, match="offset -3 is not valid"):
        offsets.reset_offsets("g", "T", {0: 5, 1: -3})
    assert offsets.offsets_of("g", "T") == {0: 0, 1: 100, 2: 7}  # all or nothing
    offsets.reset_offsets("g", "T", {})
    offsets.reset_offsets("g", "U", {})
    assert offsets.offsets_of("g", "U") == {}
    assert offsets.persist() is False


def test_delete_group(tmp_path):
    offsets = ConsumerOffsetManager(tmp_path)
    offsets.commit_offset("g", "T", 0, 1)
    offsets.commit_offset("g", "U", 0, 1)
    offsets.commit_offset("gg", "T", 0, 1)
    offsets.commit_offset("h", "T", 0, 1)
    assert offsets.delete_group("g") == 2
    assert offsets.delete_group("g") == 0
    assert offsets.query_offset("g", "T", 0) == -1
    assert offsets.query_offset("gg", "T", 0) == 1
    offsets.persist()
    assert set(json.loads((tmp_path / "consumerOffset.json").read_text())["offsetTable"]) == {"T@gg", "T@h"}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("g", "T", -1, 0), "queue id -1 is not valid"),
        (("g", "T", 0, -1), "offset -1 is not valid"),
        (("g", "T", 0, 1.5), "offset 1.5 is not valid"),
        (("g", "T", True, 1), "queue id True is not valid"),
        (("g", "a@b", 0, 1), "'@' is not allowed in a topic name"),
        (("a@b", "T", 0, 1), "'@' is not allowed in a consumer group name"),
        (("", "T", 0, 1), "consumer group name is empty"),
    ],
)
def test_bad_commits_are_refused(tmp_path, args, message):
    offsets = ConsumerOffsetManager(tmp_path)
    with pytest.raises(InvalidOffsetError, match=message):
        offsets.commit_offset(*args)
    assert offsets.persist() is False


def test_concurrent_commits_and_persists(tmp_path):
    offsets = ConsumerOffsetManager(tmp_path)
    threads_count, commits = 8, 2000
    start = threading.Barrier(threads_count + 1)
    done = threading.Event()

    def committer(queue_id):
        start.wait()
        for offset in range(1, commits + 1):
            offsets.commit_offset("g", "T", queue_id, offset)
            offsets.commit_offset("shared", "T", 0, offset)

    def persister():
        start.wait()
        while not done.is_set():
            offsets.persist()

    workers = [threading.Thread(target=committer, args=(q,)) for q in range(threads_count)]
    saver = threading.Thread(target=persister)
    for thread in [*workers, saver]:
        thread.start()
    for thread in workers:
        thread.join()
    done.set()
    saver.join()
    offsets.persist()

    expected = {q: commits for q in range(threads_count)}
    assert offsets.offsets_of("g", "T") == expected
    reloaded = ConsumerOffsetManager(tmp_path)
    assert reloaded.offsets_of("g", "T") == expected
    assert 1 <= reloaded.query_offset("shared", "T", 0) <= commits


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"offsetTable": {"T@g": {"0": 12,, "1": 3}}}', "line 1 column 34: Expecting property name"),
        ('{"offsetTable": {"Tg": {"0": 12}}}', "key 'Tg' is not of the form 'topic@group'"),
        ('{"offsetTable": {"T@g": {"x": 12}}}', "queue id 'x' is not a number"),
        ('{"offsetTable": {"T@g": {"0": -4}}}', "offset -4 is not a non-negative integer"),
        ('{"offsetTable": {"T@g": [1]}}', r"offsetTable\['T@g'\] must be an object"),
        ('{"offsetTable": []}', "offsetTable must be a JSON object"),
    ],
)
def test_malformed_file_is_refused(tmp_path, text, message):
    (tmp_path / "consumerOffset.json").write_text(text)
    with pytest.raises(ConfigFileError, match=message):
        ConsumerOffsetManager(tmp_path)
