"""What shared state's records have in common: a new write's version, which write wins, and record bodies cut
under the size a record may have."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from peers.versions import MAX_RECORD_BYTES, Version, decode_batch, encode_batches, later, next_version


def test_a_new_write_is_later_than_every_version_known_even_when_the_clock_is_behind():
    known = Version(2_000, "broker-b")
    assert next_version(1_000, "broker-a", known) > known
    assert next_version(5_000, "broker-a", known) == Version(5_000, "broker-a")
    assert next_version(5_000, "broker-a", None) == Version(5_000, "broker-a")


def test_a_later_version_wins_and_the_same_one_heard_again_does_not():
    version = Version(7, "broker-a")
    assert later(version, None)
    assert not later(version, version)
    assert later(Version(7, "broker-b"), version)  # the group orders two writes of one nanosecond
    assert not later(Version(6, "broker-z"), version)


@given(st.lists(st.dictionaries(st.sampled_from("abc"), st.text(max_size=2000), max_size=3), max_size=1200))
def test_batches_read_back_in_order_each_under_the_record_size(entries):
    bodies = list(encode_batches("items", entries))
    assert all(len(body) <= MAX_RECORD_BYTES for body in bodies)
    assert [entry for body in bodies for entry in decode_batch("items", body)] == entries


@pytest.mark.parametrize(("body", "error"), [(b"{", "not JSON"), (b'{"other": []}', 'expected {"items": [...]}'),
                                             (b'{"items": 3}', 'expected {"items": [...]}')])  # fmt: skip
def test_a_malformed_body_is_refused_with_what_is_wrong(body, error):
    with pytest.raises(ValueError, match=re.escape(error)):
        decode_batch("items", body)
