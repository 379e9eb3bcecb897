"""The versions of a shared directory's files: records read back as written, refused when they could write outside
the directory, and last-writer-wins converging whatever order the writes arrive in."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peers.file_versions import FileWrite, Known, decode_writes, digest, encode_writes, wins
from peers.versions import MAX_RECORD_BYTES, Version

names = st.text("abcxyz-_.@0123456789", min_size=1, max_size=30).filter(lambda n: not n.startswith("."))
versions = st.builds(Version, st.integers(0, 2**63), st.sampled_from(["broker-a", "broker-b", "broker-c"]))
writes = st.builds(FileWrite, names, versions, st.one_of(st.none(), st.binary(max_size=200)))


@given(st.lists(writes, max_size=20))
def test_writes_are_read_back_as_written(batch):
    bodies = list(encode_writes(batch))
    assert [write for body in bodies for write in decode_writes(body)] == batch


def test_a_whole_state_larger_than_a_record_is_split():
    batch = [FileWrite(f"f{n}.yaml", Version(n, "g"), b"x" * 300_000) for n in range(10)]
    bodies = list(encode_writes(batch))
    assert len(bodies) > 1
    assert all(len(body) <= MAX_RECORD_BYTES for body in bodies)
    assert [write for body in bodies for write in decode_writes(body)] == batch


@pytest.mark.parametrize(
    "entry, reason",
    [
        ({"name": "../escape.yaml", "time": 1, "group": "g", "content": None}, "not a plain file name"),
        ({"name": ".hidden.yaml", "time": 1, "group": "g", "content": None}, "not a plain file name"),
        ({"name": "a.yaml", "time": "1", "group": "g", "content": None}, "no version"),
        ({"name": "a.yaml", "time": 1, "group": "g", "content": "%%%"}, "not base64"),
    ],
)
def test_a_record_that_could_do_harm_or_is_malformed_is_refused_saying_why(entry, reason):
    with pytest.raises(ValueError, match=reason):
        decode_writes(json.dumps({"files": [entry]}).encode())


@pytest.mark.parametrize("body", [b"not json", b"[]", b'{"files": 3}'])
def test_a_body_that_is_no_record_is_refused(body):
    with pytest.raises(ValueError):
        decode_writes(body)


@given(st.lists(st.tuples(st.sampled_from(["a.yaml", "b.yaml"]), versions), min_size=1, max_size=12), st.randoms())
def test_every_order_of_arrival_ends_with_the_latest_write_of_each_file(batch, rng):
    def apply(order):
        known: dict[str, Known] = {}
        for name, version in order:
            if wins(version, known.get(name)):
                known[name] = Known(version, None)
        return {name: k.version for name, k in known.items()}

    shuffled = list(batch)
    rng.shuffle(shuffled)
    latest = {}
    for name, version in batch:
        latest[name] = max(latest.get(name, version), version)
    assert apply(batch) == apply(shuffled) == latest


def test_the_same_write_heard_again_does_not_win():
    version = Version(7, "g")
    assert not wins(version, Known(version, digest(b"x")))
    assert wins(Version(8, "g"), Known(version, digest(b"x")))
