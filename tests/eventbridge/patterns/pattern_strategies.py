"""Hypothesis strategies for event patterns and events, shared by the matcher's property tests. Keys, strings and
numbers come from small pools so that patterns and events collide often (a random string would almost never
match)."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

KEYS = st.sampled_from(["a", "b", "c"])
TEXTS = st.sampled_from(["", "a", "ab", "abc", "b", "B", "Ab", "a*", "x.png", "10.0.0.1", "10.0.1.9", "::1", "fe80::2"])
NUMBERS = st.sampled_from([-1, 0, 0.5, 1, 1.0, 2, 5, 5.5, 10])
LEAVES = st.one_of(TEXTS, NUMBERS, st.booleans(), st.none())


def events() -> st.SearchStrategy[dict[str, Any]]:
    values = st.recursive(
        LEAVES,
        lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
        max_leaves=8,
    )
    return st.dictionaries(KEYS, values, max_size=3)


WILDCARDS = st.sampled_from(["*", "a*", "*b", "a*b", "a\\*", "*.png", "a*c*", "ab"])
PREFIXES = st.sampled_from(["", "a", "ab", "A", "10.0."])
NUMERIC = st.one_of(
    st.tuples(st.sampled_from(["=", "<", "<=", ">", ">="]), NUMBERS).map(list),
    st.tuples(
        st.sampled_from([">", ">="]),
        st.sampled_from([-1, 0, 1]),
        st.sampled_from(["<", "<="]),
        st.sampled_from([2, 5, 10]),
    ).map(list),
)
MATCHERS = st.one_of(
    LEAVES,
    st.builds(lambda t: {"prefix": t}, PREFIXES),
    st.builds(lambda t: {"suffix": t}, st.sampled_from(["", "b", "png", "1"])),
    st.builds(lambda t: {"equals-ignore-case": t}, st.sampled_from(["ab", "AB", "b"])),
    st.builds(lambda t: {"prefix": {"equals-ignore-case": t}}, st.sampled_from(["", "A", "aB", "x"])),
    st.builds(lambda t: {"suffix": {"equals-ignore-case": t}}, st.sampled_from(["B", "PNG", "ab"])),
    st.builds(lambda t: {"wildcard": t}, WILDCARDS),
    st.builds(lambda n: {"numeric": n}, NUMERIC),
    st.builds(lambda e: {"exists": e}, st.booleans()),
    st.builds(lambda c: {"cidr": c}, st.sampled_from(["10.0.0.0/24", "10.0.0.0/8", "::/0", "fe80::/10"])),
    st.builds(
        lambda v: {"anything-but": v},
        st.one_of(
            TEXTS,
            NUMBERS,
            st.lists(st.one_of(TEXTS, NUMBERS), min_size=1, max_size=3),
            st.builds(lambda t: {"prefix": t}, PREFIXES),
            st.builds(lambda t: {"suffix": t}, st.sampled_from(["b", "png"])),
            st.builds(lambda t: {"wildcard": t}, WILDCARDS),
            st.builds(lambda t: {"equals-ignore-case": t}, st.sampled_from(["ab", "B"])),
        ),
    ),
)


def patterns() -> st.SearchStrategy[dict[str, Any]]:
    leaf = st.lists(MATCHERS, min_size=1, max_size=3)

    def objects(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
        fields = st.dictionaries(KEYS, inner, min_size=1, max_size=3)
        with_or = st.builds(
            lambda fs, alternatives: {**fs, "$or": alternatives},
            st.dictionaries(KEYS, inner, max_size=2),
            st.lists(st.dictionaries(KEYS, inner, min_size=1, max_size=2), min_size=1, max_size=3),
        )
        return st.one_of(fields, with_or)

    return objects(st.recursive(leaf, objects, max_leaves=4))
