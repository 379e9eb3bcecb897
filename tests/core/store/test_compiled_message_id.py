"""The compiled message ids (core/store/message_id.py) against their pure twin, the same .py interpreted
(tests/compiled_modules.py): the same offset message ids for generated hosts, ports and offsets, the same decoding
and the same refusals of text that is no id, and unique ids of the same shape and sequence."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

import core.store.message_id as compiled
from tests.compiled_modules import outcome, pure_twin

pure = pure_twin("core.store.message_id")


hosts = st.one_of(st.ip_addresses(v=4), st.ip_addresses(v=6)).map(str)
ports = st.integers(0, 2**32 - 1)
offsets = st.integers(-(2**63), 2**63 - 1)


@settings(max_examples=300)
@given(hosts, ports, offsets)
def test_offset_message_ids_encode_and_decode_alike(host, port, offset):
    encoded = outcome(compiled.encode_offset_msg_id, (host, port), offset)
    assert encoded == outcome(pure.encode_offset_msg_id, (host, port), offset)
    assert encoded[0] == "result"
    assert outcome(compiled.decode_offset_msg_id, encoded[1]) == outcome(pure.decode_offset_msg_id, encoded[1])


@settings(max_examples=300)
@given(st.one_of(st.text(max_size=60), st.text(alphabet="0123456789abcdefABCDEF", min_size=0, max_size=64)))
def test_any_text_decodes_or_is_refused_alike(text):
    assert outcome(compiled.decode_offset_msg_id, text) == outcome(pure.decode_offset_msg_id, text)


@given(hosts, st.integers(1, 50))
def test_unique_ids_have_the_same_shape_and_sequence(host, count):
    ours, theirs = compiled.UniqueIdGenerator(host), pure.UniqueIdGenerator(host)
    a = [ours.next_id(), *ours.next_ids(count), ours.next_id()]
    b = [theirs.next_id(), *theirs.next_ids(count), theirs.next_id()]
    # The same host and pid, a random prefix of each generator's own, and the same counter from 0.
    assert [x[:12] for x in a] == [x[:12] for x in b] and len({x[12:20] for x in a}) == 1
    assert [x[20:] for x in a] == [x[20:] for x in b] == [f"{n:012X}" for n in range(count + 2)]
    assert all(len(x) == 32 for x in a + b)


@given(st.integers(0, 2**64))
def test_the_counter_part_is_its_low_48_bits_in_upper_case_hex(n):
    # Against the plain format it replaced: 12 digits, zero-filled, wrapping past 2**48.
    assert compiled._counter_hex(n) == pure._counter_hex(n) == f"{n & 0xFFFFFFFFFFFF:012X}"
