"""The compiled EventBridge matcher (matcher.py, field_trie.py, leaf_index.py, patterns/operators.py) against its pure
twin, the same .py files interpreted (tests/compiled_modules.py; the twin compiles its patterns with a twin of
patterns/compiler.py, so that it matches on operators of the pure patterns/operators.py): the same rules matched for
generated patterns and events, the same operators accepting the same values, the same errors."""

from __future__ import annotations

from enum import IntEnum
from types import MappingProxyType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import eventbridge.patterns.compiler as pattern_compiler
import eventbridge.patterns.leaf_index as compiled_leaf_index
import eventbridge.patterns.matcher as compiled_matcher
import eventbridge.patterns.operators as compiled_operators
from tests.compiled_modules import outcome, pure_twin
from tests.eventbridge.patterns.pattern_strategies import KEYS, LEAVES, MATCHERS, TEXTS, events, patterns

pure_matcher = pure_twin("eventbridge.patterns.matcher")
pure_leaf_index = pure_twin("eventbridge.patterns.leaf_index")
pure_operators = pure_twin("eventbridge.patterns.operators")
pure_pattern_compiler = pure_twin("eventbridge.patterns.compiler")


def test_the_twins_are_apart():
    assert pure_matcher.compile_pattern is pure_pattern_compiler.compile_pattern
    assert pure_pattern_compiler.Exact is pure_operators.Exact is not compiled_operators.Exact
    assert pure_leaf_index.LeafIndex is not compiled_leaf_index.LeafIndex


class Level(IntEnum):
    LOW = 1
    HIGH = 10


class Text(str):
    pass


# Values past a double's precision (2**53 + 1) or range (10**400): numbers compare exactly with the bounds.
EXACT_NUMBERS = st.sampled_from([2**53, 2**53 + 1, -(2**63), 10**400, -(10**400), 1e300, -0.0])
EVENT_LEAVES = st.one_of(LEAVES, EXACT_NUMBERS)


def unusual(value: Any) -> st.SearchStrategy[Any]:
    """`value` as a caller other than the JSON decoder may hand it over: Mappings that are not dicts, a str subclass,
    an int subclass (not bool). The matcher takes them through its slower isinstance branches."""
    if isinstance(value, dict):
        inner = st.fixed_dictionaries({key: unusual(item) for key, item in value.items()})
        return st.one_of(inner, inner.map(MappingProxyType))
    if isinstance(value, list):
        return st.tuples(*(unusual(item) for item in value)).map(list)
    if isinstance(value, str):
        return st.sampled_from([value, Text(value)])
    if value in (1, 10) and type(value) is int:
        return st.sampled_from([value, Level(value)])
    return st.just(value)


def event_values() -> st.SearchStrategy[Any]:
    return st.recursive(
        EVENT_LEAVES,
        lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(KEYS, inner, max_size=3)),
        max_leaves=8,
    )


all_events = st.one_of(events(), st.dictionaries(KEYS, event_values(), max_size=3)).flatmap(unusual)


@settings(max_examples=200)
@given(st.lists(patterns(), min_size=1, max_size=8), st.lists(all_events, min_size=1, max_size=6))
def test_matchers_match_alike(rules, sample):
    numbered = list(enumerate(rules))
    compiled = compiled_matcher.Matcher(numbered)
    pure = pure_matcher.Matcher(numbered)
    assert compiled.rule_count == pure.rule_count == len(rules)
    for event in sample:
        assert outcome(compiled.matches, event) == outcome(pure.matches, event)


@settings(max_examples=100)
@given(st.lists(patterns(), min_size=1, max_size=4), st.one_of(st.none(), TEXTS, st.lists(LEAVES, max_size=2)))
def test_matchers_refuse_what_is_not_an_event_alike(rules, not_an_event):
    numbered = list(enumerate(rules))
    compiled = outcome(compiled_matcher.Matcher(numbered).matches, not_an_event)
    assert compiled == outcome(pure_matcher.Matcher(numbered).matches, not_an_event)
    assert compiled[:2] == ("error", "TypeError")


@settings(max_examples=200)
@given(st.lists(MATCHERS, min_size=1, max_size=4), st.lists(EVENT_LEAVES.flatmap(unusual), min_size=1, max_size=8))
def test_operators_and_leaf_indexes_accept_alike(leaf, values):
    """One pattern leaf, compiled into operators by each twin: the same operators (as their repr shows them), each
    accepting the same values, and a LeafIndex of them probing the same ids."""
    pattern = {"a": leaf}
    operators = []
    for compiler in (pattern_compiler, pure_pattern_compiler):
        (conjunction,) = compiler.compile_pattern(pattern).alternatives
        (condition,) = conjunction
        operators.append(condition.matchers)
    compiled_ops, pure_ops = operators
    assert repr(compiled_ops) == repr(pure_ops)
    assert [type(op).__module__ for op in pure_ops] == ["eventbridge.patterns.operators__pure"] * len(pure_ops)
    for value in values:
        assert [outcome(op.accepts, value) for op in compiled_ops] == [outcome(op.accepts, value) for op in pure_ops]
    indexes = (compiled_leaf_index.LeafIndex(), pure_leaf_index.LeafIndex())
    for index, ops in zip(indexes, operators, strict=True):
        for ident, op in enumerate(ops):
            # The matcher keeps `exists` and `anything-but` itself; LeafIndex.add takes the other operators only (a
            # compiled one raises TypeError for those two, the interpreted one ignores them: no caller passes them).
            if type(op).__name__ not in ("Exists", "AnythingBut"):
                index.add(op, ident)
    probes = [index.probes() for index in indexes]
    for value in values:
        kind = "string" if isinstance(value, str) else "number" if compiled_operators.is_number(value) else "other"
        hits = []
        for leaf_probes in probes:
            probe = getattr(leaf_probes, kind)
            found: set[int] = set()
            if probe is not None:
                probe(value, found)
            hits.append(found)
        assert hits[0] == hits[1]


def wildcard_of(operators: Any, pattern: str) -> str:
    return repr(operators.Wildcard.of(pattern))


addresses = st.one_of(
    st.ip_addresses().map(str),
    st.sampled_from(["010.0.0.1", "1.2.3", "1.2.3.4.5", "256.0.0.1", "0.0.0.0", " 1.2.3.4", "a\x00", "\ud800"]),
    st.just("\u0661.\u0662.\u0663.\u0664"),  # Arabic-Indic digits: int() takes them, an IPv4 address does not
    st.text(alphabet="0123456789.:abcdef", max_size=20),
)


@settings(max_examples=200)
@given(addresses, st.text(alphabet="ab*\\.", max_size=8))
def test_operator_helpers_answer_alike(text, wildcard):
    assert compiled_operators.ipv4_number(text) == pure_operators.ipv4_number(text)
    assert compiled_operators.parse_ip(text) == pure_operators.parse_ip(text)
    compiled, pure = (outcome(wildcard_of, twin, wildcard) for twin in (compiled_operators, pure_operators))
    assert compiled == pure
