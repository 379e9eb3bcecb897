"""The store's CRC-32 is zlib's: the same values for any bytes and any starting value, so records written by
either read with the other."""

import zlib

from hypothesis import given
from hypothesis import strategies as st

from core.store.log import checksum


def test_the_fast_implementation_is_in_use():
    assert checksum.crc32 is not zlib.crc32
    assert checksum.crc32.__module__.startswith("isal")


@given(st.binary(max_size=10_000), st.integers(min_value=0, max_value=2**32 - 1))
def test_the_values_are_zlibs(data, start):
    assert checksum.crc32(data, start) == zlib.crc32(data, start)
    assert checksum.crc32(data) == zlib.crc32(data)


@given(st.binary(max_size=512), st.data())
def test_buffers_and_slices_are_checked_as_their_bytes(data, draw):
    begin = draw.draw(st.integers(0, len(data)))
    end = draw.draw(st.integers(begin, len(data)))
    view = memoryview(data)[begin:end]
    assert checksum.crc32(view) == zlib.crc32(data[begin:end])
    assert checksum.crc32(bytearray(data)) == zlib.crc32(data)
