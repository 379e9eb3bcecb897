"""The epoch file: entries survive a reopen, a damaged file is refused, entries must follow one another, and two
logs' consistent point is what a plain model of their histories says (hypothesis)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.store.ha.epoch_file import EpochFile, EpochFileError, consistent_offset


def test_entries_survive_a_reopen_and_a_cut(tmp_path):
    epochs = EpochFile(tmp_path)
    assert epochs.load() == []
    epochs.append(1, 0)
    epochs.append(2, 500)
    epochs.append(4, 900)
    assert EpochFile(tmp_path).load() == [(1, 0), (2, 500), (4, 900)]
    epochs.truncate_from(900)
    assert EpochFile(tmp_path).load() == [(1, 0), (2, 500)] and epochs.last() == (2, 500)


def test_an_entry_must_follow_the_last(tmp_path):
    epochs = EpochFile(tmp_path)
    epochs.append(3, 100)
    with pytest.raises(EpochFileError, match="epoch 3 from offset 200 does not follow epoch 3 from 100"):
        epochs.append(3, 200)
    with pytest.raises(EpochFileError, match="does not follow"):
        epochs.append(4, 50)
    assert epochs.entries == [(3, 100)]


def test_a_damaged_file_is_refused(tmp_path):
    epochs = EpochFile(tmp_path)
    epochs.append(1, 0)
    epochs.append(2, 4096)
    text = epochs.path.read_text().replace("4096", "4097")
    epochs.path.write_text(text)
    with pytest.raises(EpochFileError, match="checksum"):
        EpochFile(tmp_path).load()


# A shared history of (epoch, bytes written); then each side holds more of the last shared epoch (the same bytes:
# an epoch has one master) and epochs of its own.
histories = st.tuples(
    st.lists(st.integers(1, 50), min_size=1, max_size=5),
    st.integers(0, 40),
    st.integers(0, 40),
    st.lists(st.integers(1, 50), max_size=3),
    st.lists(st.integers(1, 50), max_size=3),
)


def build(lengths, extra, own, first_own_epoch, step):
    entries, offset = [], 0
    for epoch, length in enumerate(lengths, 1):
        entries.append((epoch, offset))
        offset += length
    offset += extra
    epoch = first_own_epoch
    for length in own:
        entries.append((epoch, offset))
        offset += length
        epoch += step
    return entries, offset


@given(histories)
def test_the_consistent_point_is_the_shared_prefix(history):
    lengths, extra_a, extra_b, own_a, own_b = history
    shared = len(lengths) + 1
    a, a_end = build(lengths, extra_a, own_a, shared, 2)  # epochs shared+0, +2, ... on one side
    b, b_end = build(lengths, extra_b, own_b, shared + 1, 2)  # shared+1, +3, ... on the other
    prefix = sum(lengths) + min(extra_a, extra_b)
    assert consistent_offset(a, a_end, b, b_end) == prefix
    assert consistent_offset(b, b_end, a, a_end) == prefix


def test_logs_that_share_no_epoch_have_no_consistent_point():
    assert consistent_offset([(1, 0)], 100, [(2, 0)], 100) == -1
