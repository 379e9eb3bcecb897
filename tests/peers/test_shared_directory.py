"""A shared directory on one node: what it takes for its own writes (scan), and how it applies the other nodes'
records (record_stored), on real files. The records' way between nodes is tested with processes in
tests/cluster/test_eventbridge_cluster.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core import Message
from peers.file_versions import FileWrite, Version, encode_writes
from peers.group_peers import ClusterPeers
from peers.shared_directory import PROPERTY_KIND, SharedDirectory
from peers.shared_records import HELLO, PROPERTY_GROUP, WRITES

TOPIC = "TEST_SHARED"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        self.now += 1_000
        return self.now


@pytest.fixture
async def peers():
    peers = ClusterPeers(["127.0.0.1:1"], "broker-a", TOPIC, "TEST")  # never started: no record leaves here
    yield peers


def shared(tmp_path: Path, peers: ClusterPeers, clock: Clock | None = None) -> SharedDirectory:
    directory = SharedDirectory(
        tmp_path / "rules", lambda name: name.endswith(".yaml"), tmp_path / "state.json", peers, clock or Clock()
    )
    directory.directory.mkdir(exist_ok=True)
    directory.load()
    return directory


def record(kind: str, group: str, *writes: FileWrite) -> Message:
    body = b"".join(encode_writes(writes))
    return Message(TOPIC, body, properties={PROPERTY_KIND: kind, PROPERTY_GROUP: group})


async def test_a_scan_versions_what_was_written_changed_and_deleted_here_and_nothing_else(tmp_path, peers):
    directory = shared(tmp_path, peers)
    (directory.directory / "a.yaml").write_text("a: 1\n")
    (directory.directory / "notes.txt").write_text("not shared")
    first = directory.scan()
    assert [(w.name, w.content) for w in first] == [("a.yaml", b"a: 1\n")]
    assert directory.scan() == []  # nothing changed
    path = directory.directory / "a.yaml"
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 5_000_000))
    assert directory.scan() == []  # touched, not changed
    path.write_text("a: 2\n")
    changed = directory.scan()
    assert [(w.name, w.content) for w in changed] == [("a.yaml", b"a: 2\n")]
    assert changed[0].version > first[0].version
    path.unlink()
    deleted = directory.scan()
    assert [(w.name, w.content) for w in deleted] == [("a.yaml", None)]
    assert directory.scan() == []


async def test_after_a_restart_only_what_changed_while_down_is_a_write(tmp_path, peers):
    directory = shared(tmp_path, peers)
    (directory.directory / "a.yaml").write_text("a: 1\n")
    (directory.directory / "b.yaml").write_text("b: 1\n")
    directory.scan()
    (directory.directory / "b.yaml").write_text("b: 2\n")  # while the node is down
    again = shared(tmp_path, peers)
    assert [(w.name, w.content) for w in again.scan()] == [("b.yaml", b"b: 2\n")]


async def test_another_node_s_later_write_is_applied_and_an_earlier_one_is_not(tmp_path, peers):
    directory = shared(tmp_path, peers)
    changed = []
    directory.changed = lambda: changed.append(True)
    path = directory.directory / "a.yaml"
    directory.record_stored(record(WRITES, "broker-b", FileWrite("a.yaml", Version(10**18, "broker-b"), b"x: 1\n")))
    assert path.read_text() == "x: 1\n"
    assert changed == [True]
    assert directory.scan() == []  # written by the other node, not taken for this one's
    directory.record_stored(record(WRITES, "broker-c", FileWrite("a.yaml", Version(5, "broker-c"), b"old\n")))
    assert path.read_text() == "x: 1\n"
    assert changed == [True]
    directory.record_stored(record(WRITES, "broker-c", FileWrite("a.yaml", Version(10**18 + 1, "broker-c"), None)))
    assert not path.exists()
    # The deletion is kept: the earlier write, heard late, does not bring the file back.
    directory.record_stored(record(WRITES, "broker-b", FileWrite("a.yaml", Version(10**18, "broker-b"), b"x: 1\n")))
    assert not path.exists()
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["files"]["a.yaml"]["digest"] is None


async def test_records_that_are_not_for_this_directory_change_nothing(tmp_path, peers):
    directory = shared(tmp_path, peers)
    directory.record_stored(record(WRITES, "broker-b", FileWrite("notes.txt", Version(1, "broker-b"), b"x")))
    directory.record_stored(Message(TOPIC, b"not json", properties={PROPERTY_KIND: WRITES, PROPERTY_GROUP: "b"}))
    directory.record_stored(record(WRITES, "broker-a", FileWrite("own.yaml", Version(1, "broker-a"), b"x")))
    directory.record_stored(record("unknown", "broker-b", FileWrite("k.yaml", Version(1, "broker-b"), b"x")))
    escape = json.dumps({"files": [{"name": "../escape.yaml", "time": 1, "group": "b", "content": None}]})
    directory.record_stored(Message(TOPIC, escape.encode(), properties={PROPERTY_KIND: WRITES, PROPERTY_GROUP: "b"}))
    assert sorted(p.name for p in directory.directory.iterdir()) == []
    assert not (tmp_path / "escape.yaml").exists()


async def test_a_hello_s_files_are_applied_like_writes(tmp_path, peers):
    directory = shared(tmp_path, peers)
    directory.record_stored(record(HELLO, "broker-b", FileWrite("h.yaml", Version(10**18, "broker-b"), b"h\n")))
    assert (directory.directory / "h.yaml").read_text() == "h\n"
    await directory.close()  # its answer (to a group no NameServer knows) is given up
