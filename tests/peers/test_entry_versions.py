"""The versions of a shared table's entries: records read back as written, malformed ones refused, and last writer
wins converging to the same table whatever order (and however often) the writes arrive."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peers.entry_versions import EntryWrite, apply, decode_entries, encode_entries, live, wins
from peers.versions import MAX_RECORD_BYTES, Version

keys = st.sampled_from(["orders", "lake", "a/b", "ü"])
versions = st.builds(Version, st.integers(0, 2**63), st.sampled_from(["broker-a", "broker-b", "broker-c"]))
values = st.one_of(st.none(), st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3))
writes = st.builds(EntryWrite, keys, versions, values)


@given(st.lists(writes, max_size=20))
def test_writes_are_read_back_as_written(batch):
    bodies = list(encode_entries(batch))
    assert [write for body in bodies for write in decode_entries(body)] == batch


def test_a_whole_table_larger_than_a_record_is_split():
    batch = [EntryWrite(f"c{n}", Version(n, "g"), {"v": "x" * 300_000}) for n in range(10)]
    bodies = list(encode_entries(batch))
    assert len(bodies) > 1
    assert all(len(body) <= MAX_RECORD_BYTES for body in bodies)
    assert [write for body in bodies for write in decode_entries(body)] == batch


@pytest.mark.parametrize(
    "body, reason",
    [
        (b"not json", "not JSON"),
        (b"[]", "expected"),
        (json.dumps({"entries": [{"key": "", "time": 1, "group": "g"}]}).encode(), "non-empty"),
        (json.dumps({"entries": [{"key": "a", "time": "1", "group": "g"}]}).encode(), "no version"),
        (json.dumps({"entries": [3]}).encode(), "not an object"),
    ],
)
def test_a_malformed_record_is_refused_saying_why(body, reason):
    with pytest.raises(ValueError, match=reason):
        decode_entries(body)


# One value per (key, version): a node never writes two values of a key at one version (next_version).
unique_writes = st.lists(writes, max_size=16, unique_by=lambda write: (write.key, write.version))


@given(unique_writes, st.randoms(), st.integers(0, 3))
def test_every_order_of_arrival_and_repeats_end_in_the_same_table(batch, rng, repeats):
    heard = batch + [rng.choice(batch) for _ in range(repeats)] if batch else []
    rng.shuffle(heard)
    in_order: dict[str, EntryWrite] = {}
    apply(in_order, batch)
    shuffled: dict[str, EntryWrite] = {}
    apply(shuffled, heard)
    latest: dict[str, EntryWrite] = {}
    for write in batch:
        if write.key not in latest or write.version > latest[write.key].version:
            latest[write.key] = write
    assert in_order == shuffled == latest
    assert live(shuffled) == {key: write.value for key, write in latest.items() if write.value is not None}


def test_a_deletion_wins_over_an_older_write_and_loses_to_a_newer_one():
    known: dict[str, EntryWrite] = {}
    apply(known, [EntryWrite("c", Version(5, "broker-a"), {"x": "1"})])
    assert apply(known, [EntryWrite("c", Version(6, "broker-b"), None)])  # deleted
    assert live(known) == {}
    assert not apply(known, [EntryWrite("c", Version(4, "broker-a"), {"x": "old"})])  # an older write stays dead
    assert apply(known, [EntryWrite("c", Version(7, "broker-a"), {"x": "2"})])
    assert live(known) == {"c": {"x": "2"}}


def test_the_same_write_heard_again_does_not_win():
    write = EntryWrite("c", Version(7, "g"), {"x": "1"})
    assert not wins(write.version, write)
    assert wins(Version(8, "g"), write)
