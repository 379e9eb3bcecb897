"""The pattern operators' helpers that the matcher's hot path uses instead of the standard library, checked against
the standard library on generated input."""

from __future__ import annotations

import ipaddress

from hypothesis import example, given, settings
from hypothesis import strategies as st

from eventbridge.patterns.operators import ipv4_number

# Octets as written, right and wrong: leading zeros, too large, signs, spaces, non-ASCII digits, empty.
OCTETS = st.one_of(
    st.integers(0, 255).map(str),
    st.sampled_from(
        ["00", "01", "010", "0255", "256", "999", "1000", "-1", "+1", " 1", "1 ", "", "\u0661", "\u00b2", "0x1"]
    ),
)
DOTTED = st.lists(OCTETS, min_size=1, max_size=6).map(".".join)
IPV6 = st.one_of(
    st.integers(0, 2**128 - 1).map(lambda n: str(ipaddress.IPv6Address(n))),
    st.sampled_from(["::", "::1", "fe80::1%eth0", "::ffff:10.0.0.1", "1::2::3", "::ffff:010.0.0.1", "g::1", ":"]),
)


def expected(text: str) -> int | None:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    return int(address) if address.version == 4 else None


@settings(max_examples=2000)
@given(st.one_of(DOTTED, IPV6, st.text(alphabet="0123456789.:abf %/", max_size=20), st.text(max_size=12)))
@example("255.255.255.255")
@example("0.0.0.0")
@example("1.2.3.4/32")
@example("1.2.3.4\n")
def test_ipv4_number_agrees_with_ipaddress(text: str) -> None:
    assert ipv4_number(text) == expected(text)
