"""The compiled topic rules and tries (mqtt_bridge/topics/topic.py, topic_trie.py) against their pure twins, the same
.py files interpreted (tests/compiled_modules.py): the same answers and the same TopicErrors for generated names and
filters (wildcards, '$' names, '$share/'), and the same subscribers matched after the same adds and removes."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

import mqtt_bridge.topics.topic as compiled_topic
import mqtt_bridge.topics.topic_trie as compiled_trie
from tests.compiled_modules import outcome, pure_twin

pure_topic = pure_twin("mqtt_bridge.topics.topic")
pure_trie = pure_twin("mqtt_bridge.topics.topic_trie")


def test_the_twins_are_apart():
    assert pure_trie.filter_levels is pure_topic.filter_levels is not compiled_topic.filter_levels
    assert pure_topic.TopicError is not compiled_topic.TopicError


# Few distinct levels, so that filters and names meet; '$SYS' and '$x' for the '$' rule, '' for empty levels.
levels = st.sampled_from(["a", "b", "", "$SYS", "$x", "é"])
names = st.lists(levels, min_size=1, max_size=4).map("/".join)
filter_levels = st.one_of(levels, st.just("+"), st.just("#"), st.sampled_from(["a+", "#b", "+/"]))
filters = st.lists(filter_levels, min_size=1, max_size=4).map("/".join)
share_names = st.sampled_from(["g", "", "g+", "g#"])
subscriptions = st.one_of(filters, st.builds("$share/{}/{}".format, share_names, filters))
# Anything at all: empty, U+0000, lone surrogates, and the 65,535-byte limit.
odd_texts = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["", "\x00", "a/\x00", "\ud800", "$share", "$share/", "$share/g", "$SYS", "$SYSX/a"]),
    st.integers(65_530, 65_540).map(lambda size: "a" * size),
    st.integers(32_766, 32_770).map(lambda size: "é" * size),
)


@settings(max_examples=200)
@given(st.one_of(names, filters, subscriptions, odd_texts), names)
def test_topic_rules_answer_alike(text, name):
    for function in ("validate_topic_name", "validate_topic_filter", "filter_levels", "parse_subscription"):
        compiled = outcome(getattr(compiled_topic, function), text)
        pure = outcome(getattr(pure_topic, function), text)
        if function == "parse_subscription" and compiled[0] == pure[0] == "result":
            compiled, pure = (compiled[1].group, compiled[1].filter), (pure[1].group, pure[1].filter)
        assert compiled == pure, function
    for function in ("first_level", "is_sys_topic"):
        assert getattr(compiled_topic, function)(text) == getattr(pure_topic, function)(text)
    if outcome(compiled_topic.validate_topic_filter, text)[0] == "result":
        assert compiled_topic.matches(text, name) == pure_topic.matches(text, name)


@settings(max_examples=200)
@given(
    st.lists(st.tuples(st.booleans(), subscriptions, st.integers(0, 3), st.integers(0, 2)), max_size=30),
    st.lists(names, min_size=1, max_size=10),
)
def test_subscription_tries_match_alike(changes, published):
    """Subscribe and unsubscribe clients (keys) with a QoS (values), as the gateway does with a parsed '$share/'
    filter, then match published names on both tries: the same (filter, key, value) triples, the same sizes."""
    tries = (compiled_trie.SubscriptionTrie(), pure_trie.SubscriptionTrie())
    parsers = (compiled_topic.parse_subscription, pure_topic.parse_subscription)
    for subscribe, subscription, key, qos in changes:
        answers = []
        for trie, parse in zip(tries, parsers, strict=True):
            parsed = outcome(parse, subscription)
            if parsed[0] == "error":
                answers.append(parsed)
                continue
            topic_filter = parsed[1].filter
            answers.append(
                outcome(trie.add, topic_filter, key, qos) if subscribe else outcome(trie.remove, topic_filter, key)
            )
        assert answers[0] == answers[1]
    compiled, pure = tries
    for name in published + published[:2]:  # again: a remembered match
        assert sorted(compiled.match(name)) == sorted(pure.match(name))
        for trie in tries:
            assert trie.match_keys(name) == [key for _, key, _ in trie.match(name)]
    assert len(compiled) == len(pure)
    assert compiled.node_count() == pure.node_count()
    assert sorted(compiled.items()) == sorted(pure.items())


def names_matching(tree: Any, topic_filter: str) -> list[str]:
    return sorted(tree.matching(topic_filter))


@settings(max_examples=200)
@given(
    st.lists(st.tuples(st.booleans(), st.one_of(names, filters, st.just(""))), max_size=30),
    st.lists(st.one_of(filters, st.just("")), min_size=1, max_size=10),
)
def test_topic_trees_find_names_alike(changes, queries):
    """Store and forget retained topic names, then ask which names a new subscription's filter matches."""
    trees = (compiled_trie.TopicTree(), pure_trie.TopicTree())
    for add, name in changes:
        answers = [outcome(tree.add, name) if add else outcome(tree.discard, name) for tree in trees]
        assert answers[0] == answers[1]
        assert (name in trees[0]) == (name in trees[1])
    compiled, pure = trees
    for topic_filter in queries:
        found = [outcome(names_matching, tree, topic_filter) for tree in trees]
        assert found[0] == found[1]
    assert len(compiled) == len(pure)
    assert compiled.node_count() == pure.node_count()
