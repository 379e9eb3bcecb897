"""Queues named with their broker group (QueueRef.broker) in exactly-once sinks' stored offsets: what was stored
before groups were named (the file sink's sidecar, the Spark sink's format 1 manifest) is read as the queues of the
group of the node that opens it, and written back named; the file sink's `{task}` splits it into tasks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from connectors.api import QueueRef, TaskContext
from connectors.file_sink import FileSinkConnector, FileSinkTask
from spark_sink.errors import TableStateError
from spark_sink.table_commit import MANIFEST, META_DIR, TableCommitter, named_offsets, parse_queue_key, queue_key


def test_a_ref_without_a_group_is_the_given_group_s():
    assert QueueRef("t", 1).in_group("broker-a") == QueueRef("t", 1, "broker-a")
    assert QueueRef("t", 1, "broker-b").in_group("broker-a") == QueueRef("t", 1, "broker-b")
    assert QueueRef("t", 1).in_group("") == QueueRef("t", 1)


async def test_the_file_sink_resumes_from_a_sidecar_written_before_groups_were_named(tmp_path: Path):
    out = tmp_path / "out.txt"
    out.write_bytes(b"one\ntwo\nnot committed\n")
    sidecar = tmp_path / "out.txt.offsets"
    sidecar.write_text(json.dumps({"length": 8, "offsets": [["orders", 0, 2], ["orders", 1, 0]]}))
    task = FileSinkTask()
    await task.start({"file": str(out)}, TaskContext("sink", 0, group="broker-a"))
    assert out.read_bytes() == b"one\ntwo\n"  # cut to what was committed
    refs = [QueueRef("orders", 0, "broker-a"), QueueRef("orders", 1, "broker-a"), QueueRef("orders", 0, "broker-b")]
    assert await task.stored_offsets(refs) == {refs[0]: 2, refs[1]: 0}
    await task.flush({QueueRef("orders", 0, "broker-b"): 7})
    entries = json.loads(sidecar.read_text())["offsets"]
    assert sorted(entries) == [["orders", 0, 2, "broker-a"], ["orders", 0, 7, "broker-b"], ["orders", 1, 0, "broker-a"]]
    # Opened by another node now: the named entries are what they say.
    again = FileSinkTask()
    await again.start({"file": str(out)}, TaskContext("sink", 0, group="broker-b"))
    assert await again.stored_offsets(refs) == {refs[0]: 2, refs[1]: 0, refs[2]: 7}


def test_the_file_sink_is_one_task_unless_its_file_names_the_task(tmp_path: Path):
    connector = FileSinkConnector()
    assert len(connector.task_configs({"file": str(tmp_path / "a.txt"), "topics": ["t"]}, 3)) == 1
    assert len(connector.task_configs({"file": str(tmp_path / "a-{task}.txt"), "topics": ["t"]}, 3)) == 3


async def test_each_task_of_a_split_file_sink_writes_its_own_file(tmp_path: Path):
    files = []
    for number in range(2):
        task = FileSinkTask()
        await task.start({"file": str(tmp_path / "lines-{task}.txt")}, TaskContext("sink", number, group="g"))
        files.append(task.path)
    assert files == [tmp_path / "lines-0.txt", tmp_path / "lines-1.txt"]


topics = st.text("abcXYZ_-%0123456789", min_size=1, max_size=12)
groups = st.text("abc-_0123456789/", min_size=1, max_size=12)


@given(topics, st.integers(0, 1000), st.one_of(st.just(""), groups))
def test_manifest_queue_keys_are_read_back_as_written(topic, queue_id, group):
    ref = QueueRef(topic, queue_id, group)
    assert parse_queue_key(queue_key(ref)) == ref


def test_format_1_keys_are_the_opening_group_s_unless_the_queue_is_also_named():
    offsets = {"orders/0": 10, "orders/1": 4, "broker-a/orders/1": 9, "broker-b/orders/0": 3}
    assert named_offsets(offsets, "broker-a") == {
        "broker-a/orders/0": 10,
        "broker-a/orders/1": 9,  # named: newer than the format 1 key
        "broker-b/orders/0": 3,
    }


def test_a_format_1_manifest_is_named_with_the_opening_group_at_once(tmp_path: Path):
    meta = tmp_path / META_DIR
    meta.mkdir()
    manifest = {"format": 1, "batch": 3, "offsets": {"orders/0": 10}, "staged": "", "moving": [], "schema": None}
    (meta / MANIFEST).write_text(json.dumps(manifest))
    table = TableCommitter(tmp_path, durable=False)
    table.open("broker-a")
    try:
        assert table.offsets() == {QueueRef("orders", 0, "broker-a"): 10}
        on_disk = json.loads((meta / MANIFEST).read_text())
        assert on_disk["format"] == 2 and on_disk["offsets"] == {"broker-a/orders/0": 10} and on_disk["batch"] == 3
    finally:
        table.close()
    # Another node opening it later reads the group it names, not its own.
    table = TableCommitter(tmp_path, durable=False)
    table.open("broker-b")
    try:
        assert table.offsets() == {QueueRef("orders", 0, "broker-a"): 10}
    finally:
        table.close()


def test_a_manifest_of_an_unknown_format_is_refused(tmp_path: Path):
    meta = tmp_path / META_DIR
    meta.mkdir()
    (meta / MANIFEST).write_text(json.dumps({"format": 9, "batch": 0, "offsets": {}, "staged": "", "moving": []}))

    with pytest.raises(TableStateError, match="format 9"):
        TableCommitter(tmp_path, durable=False).open("g")
