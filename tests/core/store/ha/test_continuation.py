"""The slave's check of the master's bytes: whole records out, whatever the cuts; what does not continue the log is
refused. Records are a real commit log's, read back from its segment."""

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.store.ha.continuation import LogContinuation, ReplicationRefused
from core.store.message import Message

from ..conftest import small_config

SEGMENT = 1024 * 1024


@pytest.fixture(scope="module")
def log_bytes(tmp_path_factory):
    """A master's log of two segments (the first closed by a filler) and the offsets of its records."""
    from core.store.message_store import MessageStore

    store = MessageStore(small_config(tmp_path_factory.mktemp("master")))
    store.open()
    try:
        offsets = []
        while store.end_offset < SEGMENT + 5000:
            body = b"x" * (200_000 if len(offsets) % 3 == 0 else 100)
            put = store.append(Message(topic="t", body=body, queue_id=len(offsets) % 2, properties={"KEYS": "k"}))
            offsets.append(put.commit_log_offset)
        store.wait_dispatched()
        store.commit_log.commit()
        data = b"".join(bytes(m.view) for m in store.commit_log.files.files)
        return data[: store.end_offset], offsets
    finally:
        store.close()


def feed(continuation, data, start, cuts):
    pieces = []
    points = sorted({start, *(start + c % (len(data) - start + 1) for c in cuts), len(data)})
    for a, b in itertools.pairwise(points):
        pieces += continuation.accept(a, data[a:b])
    return pieces


@settings(max_examples=30, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.integers(0, 2 * SEGMENT), max_size=12))
def test_whole_records_come_out_in_order_however_the_master_cuts(log_bytes, cuts):
    data, offsets = log_bytes
    continuation = LogContinuation(0, True, SEGMENT, 300 * 1024)
    pieces = feed(continuation, data, 0, cuts)
    records = [m.commit_log_offset for piece in pieces for m in piece.messages]
    assert records == offsets
    fillers = [piece for piece in pieces if piece.filler]
    assert len(fillers) == 1 and fillers[0].pos < SEGMENT
    for piece in pieces:
        assert data[piece.pos : piece.end] == piece.data
    assert continuation.parsed == len(data)


def test_data_at_another_offset_is_refused(log_bytes):
    data, offsets = log_bytes
    continuation = LogContinuation(offsets[2], False, SEGMENT, 300 * 1024)
    with pytest.raises(ReplicationRefused, match=f"offset {offsets[3]}, but this log ends at {offsets[2]}"):
        continuation.accept(offsets[3], data[offsets[3] :])


def test_bytes_that_are_not_a_record_where_one_starts_are_refused(log_bytes):
    data, offsets = log_bytes
    middle = offsets[1] + 50  # inside a record: this log's end is not a record boundary of the master's
    continuation = LogContinuation(middle, False, SEGMENT, 300 * 1024)
    with pytest.raises(ReplicationRefused, match=r"not a record of this log|says it is at"):
        continuation.accept(middle, data[middle : middle + 4096])


def test_a_record_at_the_wrong_place_or_damaged_is_refused(log_bytes):
    data, offsets = log_bytes
    record = data[offsets[1] : offsets[2]]
    continuation = LogContinuation(offsets[2], False, SEGMENT, 300 * 1024)
    with pytest.raises(ReplicationRefused, match=f"says it is at {offsets[1]}"):
        continuation.accept(offsets[2], record)
    damaged = bytearray(data[offsets[1] : offsets[2]])
    damaged[-3] ^= 0xFF
    with pytest.raises(ReplicationRefused, match="damaged"):
        LogContinuation(offsets[1], False, SEGMENT, 300 * 1024).accept(offsets[1], bytes(damaged))


def test_an_empty_log_starts_where_the_master_starts_a_segment(log_bytes):
    data, offsets = log_bytes
    continuation = LogContinuation(0, True, SEGMENT, 300 * 1024)
    pieces = continuation.accept(SEGMENT, data[SEGMENT:])
    assert pieces[0].pos == SEGMENT and [m.commit_log_offset for m in pieces[0].messages] == [
        o for o in offsets if o >= SEGMENT
    ]
    with pytest.raises(ReplicationRefused):
        LogContinuation(0, True, SEGMENT, 300 * 1024).accept(SEGMENT + 8, data[SEGMENT + 8 :])


def test_a_master_with_other_segments_is_refused(log_bytes):
    data, _ = log_bytes
    continuation = LogContinuation(0, True, SEGMENT * 2, 300 * 1024)
    with pytest.raises(ReplicationRefused, match="segment_size"):
        continuation.accept(0, data[:SEGMENT])


def test_the_masters_copy_of_this_logs_tail_must_be_the_same_bytes(log_bytes):
    data, offsets = log_bytes
    end = offsets[5]
    tail = data[end - 4096 : end]
    same = LogContinuation(end, False, SEGMENT, 300 * 1024, tail)
    assert same.start == end - 4096
    pieces = same.accept(end - 4096, data[end - 4096 : offsets[7]])
    assert [m.commit_log_offset for piece in pieces for m in piece.messages] == offsets[5:7]
    other = bytearray(tail)
    other[100] ^= 1
    differing = LogContinuation(end, False, SEGMENT, 300 * 1024, bytes(other))
    with pytest.raises(ReplicationRefused, match=f"differs from this one at commit-log offset {end - 4096 + 100}"):
        differing.accept(end - 4096, data[end - 4096 : offsets[7]])
