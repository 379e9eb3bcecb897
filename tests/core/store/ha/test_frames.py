"""The HA link's bytes against a plain reading of RocketMQ's layout: 8-byte reports, 12-byte frame headers."""

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.store.ha.frames import (
    FrameReader,
    HAProtocolError,
    ReportReader,
    encode_header,
    encode_hello,
    encode_report,
)

frames = st.lists(st.tuples(st.integers(0, 2**62), st.binary(max_size=300)), max_size=8)


def cut(data: bytes, points: list[int]) -> list[bytes]:
    points = sorted({p % (len(data) + 1) for p in points})
    pieces, last = [], 0
    for point in [*points, len(data)]:
        pieces.append(data[last:point])
        last = point
    return pieces


@given(frames, st.lists(st.integers(0, 10_000), max_size=10))
def test_frames_come_out_whole_however_the_bytes_are_cut(sent, points):
    wire = b"".join(struct.pack(">qi", offset, len(data)) + data for offset, data in sent)
    assert encode_header(5, 7) == struct.pack(">qi", 5, 7)
    reader = FrameReader(1024)
    got = []
    for piece in cut(wire, points):
        got += reader.feed(piece)
    assert got == sent


@given(st.lists(st.integers(0, 2**63 - 1), min_size=1, max_size=6), st.lists(st.integers(0, 100), max_size=6))
def test_the_last_whole_report_counts(offsets, points):
    wire = b"".join(encode_report(offset) for offset in offsets)
    assert wire == b"".join(struct.pack(">q", offset) for offset in offsets)
    reader = ReportReader()
    seen = [reader.feed(piece) for piece in cut(wire, points)]
    assert [offset for offset in seen if offset is not None][-1] == offsets[-1]


def test_a_frame_too_large_or_negative_is_refused():
    with pytest.raises(HAProtocolError, match="sizes 0 to 1024"):
        FrameReader(1024).feed(encode_header(0, 4096))
    with pytest.raises(HAProtocolError, match="offsets are 0 or more"):
        FrameReader(1024).feed(encode_header(-1, 0))
    with pytest.raises(HAProtocolError, match="negative offset"):
        ReportReader().feed(struct.pack(">q", -5))


@given(st.integers(0, 2**62), st.lists(st.integers(0, 2**62), min_size=1, max_size=5), st.lists(st.integers(0, 100)))
def test_a_controlled_slave_names_itself_before_its_reports_however_the_bytes_are_cut(broker_id, reports, points):
    wire = encode_hello(broker_id) + b"".join(encode_report(offset) for offset in reports)
    assert wire[:16] == b"MQGATEHA" + struct.pack(">q", broker_id)
    reader = ReportReader(hello=True)
    last = None
    for piece in cut(wire, points):
        offset = reader.feed(piece)
        last = offset if offset is not None else last
    assert reader.broker_id == broker_id
    assert last == reports[-1]


def test_a_controlled_master_refuses_a_slave_that_does_not_say_hello():
    reader = ReportReader(hello=True)
    with pytest.raises(HAProtocolError, match="hello"):
        reader.feed(encode_report(5) + encode_report(6))
