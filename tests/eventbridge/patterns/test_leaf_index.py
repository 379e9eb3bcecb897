"""Property: the probes a `LeafIndex` compiles give, for any leaf value, exactly the matchers whose own `accepts`
(the operator's written-down meaning) takes the value. Strings come from a two-letter alphabet so that wildcards,
prefixes and suffixes overlap and collide often; addresses and networks are drawn near each other."""

from __future__ import annotations

import ipaddress
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from eventbridge.patterns.compiler import compile_pattern
from eventbridge.patterns.leaf_index import LeafIndex, LeafProbes
from eventbridge.patterns.operators import Operator

TEXTS = st.text(alphabet="ab", max_size=6)
WILDCARDS = st.lists(st.sampled_from(["a", "b", "*", "\\*"]), max_size=6).map("".join).filter(lambda w: "**" not in w)
NUMBERS = st.one_of(st.sampled_from([-1, 0, 0.5, 1, 1.0, 2, 2.5, 3, 10]), st.integers(-3, 12))
BOUNDS = st.one_of(
    st.tuples(st.sampled_from(["=", "<", "<=", ">", ">="]), NUMBERS).map(list),
    st.tuples(st.sampled_from([">", ">="]), st.integers(-2, 2), st.sampled_from(["<", "<="]), st.integers(3, 10)).map(
        list
    ),
)
IPV4 = st.tuples(st.sampled_from([10, 192]), st.integers(0, 2), st.integers(0, 2), st.integers(0, 255))
NETWORKS = st.one_of(
    st.builds(lambda a, n: f"{a[0]}.{a[1]}.{a[2]}.{a[3]}/{n}", IPV4, st.sampled_from([0, 8, 16, 23, 24, 31, 32])),
    st.sampled_from(["::/0", "fe80::/10", "2001:db8::/32", "2001:db8::1/128", "::ffff:0:0/96"]),
)
ADDRESSES = st.one_of(
    st.builds(lambda a: f"{a[0]}.{a[1]}.{a[2]}.{a[3]}", IPV4),
    st.builds(lambda a: f"{a[0]}.{a[1]}.0{a[2]}.{a[3]}", IPV4),  # a leading zero: no address
    st.sampled_from(["fe80::1", "2001:db8::1", "2001:db9::", "::ffff:10.0.0.1", "10.0.0", "10.0.0.256", "::"]),
)
MATCHERS = st.one_of(
    TEXTS,
    NUMBERS,
    st.booleans(),
    st.none(),
    st.builds(lambda t: {"prefix": t}, TEXTS),
    st.builds(lambda t: {"suffix": t}, TEXTS),
    st.builds(lambda t: {"equals-ignore-case": t}, st.text(alphabet="aAbB", max_size=3)),
    st.builds(lambda t: {"prefix": {"equals-ignore-case": t}}, st.text(alphabet="aAbB", max_size=3)),
    st.builds(lambda t: {"suffix": {"equals-ignore-case": t}}, st.text(alphabet="aAbB", max_size=3)),
    st.builds(lambda w: {"wildcard": w}, WILDCARDS),
    st.builds(lambda b: {"numeric": b}, BOUNDS),
    st.builds(lambda c: {"cidr": c}, NETWORKS),
)
NEAR = st.integers(0, 12)  # a character to drop from a text made from a wildcard (past the end: none)
VALUES = st.one_of(TEXTS, st.text(alphabet="aAbB*", max_size=5), NUMBERS, st.booleans(), st.none(), ADDRESSES)


def operators(matchers: list[Any]) -> list[Operator]:
    return list(compile_pattern({"k": matchers}).alternatives[0][0].matchers)


def probed(probes: LeafProbes, value: object) -> set[int]:
    """The ids the probes give for `value`, chosen by its kind as the field trie chooses."""
    if isinstance(value, str):
        probe = probes.string
    elif isinstance(value, int | float) and not isinstance(value, bool):
        probe = probes.number
    else:
        probe = probes.other
    out: set[int] = set()
    if probe is not None:
        probe(value, out)
    return out


@settings(max_examples=1500)
@given(st.lists(MATCHERS, min_size=1, max_size=12), st.lists(VALUES, min_size=1, max_size=8))
def test_probes_agree_with_accepts(matchers: list[Any], values: list[object]) -> None:
    index = LeafIndex()
    compiled = operators(matchers)
    for ident, operator in enumerate(compiled):
        index.add(operator, ident)  # type: ignore[arg-type]
    probes = index.probes()
    for value in values:
        expected = {ident for ident, operator in enumerate(compiled) if operator.accepts(value)}
        assert probed(probes, value) == expected, value


def near(wildcard: str, fills: list[str], drop: int) -> str:
    """A text close to `wildcard`: its stars filled with `fills` (escapes resolved), then, if `drop` is within the
    text, without the character at `drop`, so that head and tail of a one-star wildcard come to overlap."""
    text = ""
    pieces = iter(fills)
    i = 0
    while i < len(wildcard):
        if wildcard[i] == "\\":
            text += wildcard[i + 1]
            i += 2
            continue
        text += next(pieces, "") if wildcard[i] == "*" else wildcard[i]
        i += 1
    return text[:drop] + text[drop + 1 :]


@settings(max_examples=1000)
@given(st.lists(WILDCARDS, min_size=1, max_size=10), st.data())
@example(["ab*ba", "a*a", "*", "a*", "*a"], ["aba", "a", "abba", ""])
def test_wildcards_agree_with_their_regex(wildcards: list[str], data: st.DataObject) -> None:
    """One-star wildcards are checked by their tail without the regex; a tail overlapping the head ("ab*ba" and
    "aba") must not match."""
    if not isinstance(data, st.DataObject):  # the @example passes the texts themselves
        texts: list[str] = data
    else:
        texts = [
            near(data.draw(st.sampled_from(wildcards)), data.draw(st.lists(TEXTS, max_size=3)), data.draw(NEAR))
            for _ in range(data.draw(st.integers(1, 8)))
        ]
    index = LeafIndex()
    compiled = operators([{"wildcard": w} for w in wildcards])
    for ident, operator in enumerate(compiled):
        index.add(operator, ident)  # type: ignore[arg-type]
    probes = index.probes()
    for text in texts:
        assert probed(probes, text) == {i for i, o in enumerate(compiled) if o.accepts(text)}, text


def test_cidr_networks_of_both_versions_at_one_path() -> None:
    compiled = operators([{"cidr": "10.0.0.0/8"}, {"cidr": "::/0"}, {"cidr": "10.1.0.0/16"}, {"cidr": "fe80::/10"}])
    index = LeafIndex()
    for ident, operator in enumerate(compiled):
        index.add(operator, ident)  # type: ignore[arg-type]
    probes = index.probes()
    assert probed(probes, "10.1.2.3") == {0, 2}
    assert probed(probes, "10.2.2.3") == {0}
    assert probed(probes, "fe80::7") == {1, 3}
    assert probed(probes, "10.01.2.3") == set()  # a leading zero: ipaddress refuses it, so must the matcher
    assert probed(probes, "::ffff:10.1.2.3") == {1}  # IPv6, though it ends in an IPv4 address
    assert ipaddress.ip_address("::ffff:10.1.2.3").version == 6
