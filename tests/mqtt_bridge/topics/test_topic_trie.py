"""SubscriptionTrie and TopicTree, checked against the reference matcher `topic.matches` over everything stored."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqtt_bridge.topics.topic import TopicError, matches
from mqtt_bridge.topics.topic_trie import SubscriptionTrie, TopicTree

NAME_LEVELS = ["", "$SYS", "$x", "a", "b"]


@st.composite
def topic_names(draw: st.DrawFn) -> str:
    name = "/".join(draw(st.lists(st.sampled_from(NAME_LEVELS), min_size=1, max_size=4)))
    # A single empty level is the empty string, which is no topic name.
    return name or "a"


@st.composite
def topic_filters(draw: st.DrawFn) -> str:
    levels = draw(st.lists(st.sampled_from([*NAME_LEVELS, "+"]), min_size=0, max_size=4))
    if draw(st.booleans()) or not levels:
        levels.append("#")
    return "/".join(levels) or "#"


keys = st.sampled_from(["c1", "c2", ("g", "c3")])
values = st.integers(0, 2)


def build(
    subscriptions: list[tuple[str, object, int]],
) -> tuple[SubscriptionTrie[object, int], dict[tuple[str, object], int]]:
    trie: SubscriptionTrie[object, int] = SubscriptionTrie()
    model: dict[tuple[str, object], int] = {}
    for topic_filter, key, value in subscriptions:
        trie.add(topic_filter, key, value)
        model[topic_filter, key] = value
    return trie, model


# --- SubscriptionTrie -----------------------------------------------------------------------------------------------


@given(st.lists(st.tuples(topic_filters(), keys, values), max_size=30), st.lists(topic_names(), min_size=1))
def test_match_agrees_with_reference(subscriptions: list[tuple[str, object, int]], names: list[str]) -> None:
    trie, model = build(subscriptions)
    for name in names:
        found = trie.match(name)
        assert len(found) == len(set(found)), f"a subscription was reported twice for {name!r}: {found}"
        expected = {(f, k, v) for (f, k), v in model.items() if matches(f, name)}
        assert set(found) == expected, name


operations = st.lists(st.tuples(st.booleans(), topic_filters(), keys, values), max_size=40)


@given(operations)
def test_add_remove_sequences_follow_a_model(ops: list[tuple[bool, str, object, int]]) -> None:
    trie: SubscriptionTrie[object, int] = SubscriptionTrie()
    model: dict[tuple[str, object], int] = {}
    for is_add, topic_filter, key, value in ops:
        if is_add:
            assert trie.add(topic_filter, key, value) is ((topic_filter, key) not in model)
            model[topic_filter, key] = value
        else:
            assert trie.remove(topic_filter, key) is ((topic_filter, key) in model)
            model.pop((topic_filter, key), None)
        assert len(trie) == len(model)
        assert sorted(trie.items(), key=repr) == sorted(((f, k, v) for (f, k), v in model.items()), key=repr)
    for topic_filter, key in list(model):
        assert trie.remove(topic_filter, key)
    assert len(trie) == 0
    assert trie.node_count() == 0
    assert list(trie.items()) == []


@given(operations, st.lists(topic_names(), min_size=1, max_size=5))
def test_remembered_matches_follow_every_change(ops: list[tuple[bool, str, object, int]], names: list[str]) -> None:
    # The same names are matched after every add and remove: an answer remembered from before a change is wrong.
    trie: SubscriptionTrie[object, int] = SubscriptionTrie()
    model: dict[tuple[str, object], int] = {}
    for is_add, topic_filter, key, value in ops:
        if is_add:
            trie.add(topic_filter, key, value)
            model[topic_filter, key] = value
        else:
            trie.remove(topic_filter, key)
            model.pop((topic_filter, key), None)
        for name in names:
            expected = {(f, k, v) for (f, k), v in model.items() if matches(f, name)}
            assert set(trie.match(name)) == expected, name
            assert sorted(trie.match_keys(name), key=repr) == sorted((k for _, k, _ in expected), key=repr), name


def test_the_memo_of_matches_is_bounded_and_answers_are_the_caller_s_to_keep(monkeypatch) -> None:
    monkeypatch.setattr("mqtt_bridge.topics.topic_trie.MAX_REMEMBERED_MATCHES", 3)
    trie: SubscriptionTrie[str, int] = SubscriptionTrie()
    trie.add("a/+", "c1", 0)
    for n in range(10):
        assert trie.match(f"a/{n}") == [("a/+", "c1", 0)]
        assert len(trie._matches) <= 3
    found = trie.match("a/x")
    found.clear()
    assert trie.match("a/x") == [("a/+", "c1", 0)]


def test_add_replaces_the_value_of_the_same_key() -> None:
    trie: SubscriptionTrie[str, int] = SubscriptionTrie()
    assert trie.add("a/+", "c1", 0) is True
    assert trie.add("a/+", "c1", 2) is False
    assert trie.add("a/+", "c2", 1) is True
    assert len(trie) == 2
    assert sorted(trie.match("a/b")) == [("a/+", "c1", 2), ("a/+", "c2", 1)]


def test_values_of_none_are_removable() -> None:
    trie: SubscriptionTrie[str, None] = SubscriptionTrie()
    trie.add("a", "c1", None)
    assert trie.remove("a", "c1") is True
    assert trie.remove("a", "c1") is False
    assert trie.node_count() == 0


def test_remove_keeps_the_nodes_others_need() -> None:
    trie: SubscriptionTrie[str, int] = SubscriptionTrie()
    trie.add("a/b/c", "c1", 0)
    trie.add("a", "c2", 0)
    trie.add("a/#", "c3", 0)
    assert trie.node_count() == 4  # a, a/b, a/b/c, a/#
    assert trie.remove("a/b/c", "c1")
    assert trie.node_count() == 2  # a, a/#
    assert sorted(trie.match("a")) == [("a", "c2", 0), ("a/#", "c3", 0)]
    assert trie.remove("a/#", "c3")
    assert trie.remove("a", "c2")
    assert trie.node_count() == 0


@pytest.mark.parametrize(
    ("topic_filter", "key"), [("a/b", "c1"), ("a", "c2"), ("a/+", "c1"), ("a/#/b", "c1"), ("", "c1")]
)
def test_remove_of_what_was_never_added_is_false(topic_filter: str, key: str) -> None:
    trie: SubscriptionTrie[str, int] = SubscriptionTrie()
    trie.add("a", "c1", 0)
    trie.add("a/#", "c1", 0)
    assert trie.remove(topic_filter, key) is False
    assert len(trie) == 2


def test_wildcards_and_literal_levels_are_distinct() -> None:
    trie: SubscriptionTrie[str, int] = SubscriptionTrie()
    trie.add("a/+", "plus", 0)
    trie.add("a/b", "literal", 0)
    assert trie.remove("a/+", "literal") is False
    assert trie.match("a/c") == [("a/+", "plus", 0)]


def test_dollar_topics_are_not_matched_by_leading_wildcards() -> None:
    trie: SubscriptionTrie[str, int] = SubscriptionTrie()
    for topic_filter in ("#", "+/monitor/Clients", "+/#", "$SYS/#", "$SYS/monitor/+"):
        trie.add(topic_filter, topic_filter, 0)
    assert sorted(key for _, key, _ in trie.match("$SYS/monitor/Clients")) == ["$SYS/#", "$SYS/monitor/+"]
    assert sorted(key for _, key, _ in trie.match("SYS/monitor/Clients")) == ["#", "+/#", "+/monitor/Clients"]


@pytest.mark.parametrize("topic_filter", ["", "a/#/b", "a+", "a/b#"])
def test_add_rejects_illegal_filters(topic_filter: str) -> None:
    trie: SubscriptionTrie[str, int] = SubscriptionTrie()
    with pytest.raises(TopicError):
        trie.add(topic_filter, "c1", 0)
    assert len(trie) == 0
    assert trie.node_count() == 0


# --- TopicTree ------------------------------------------------------------------------------------------------------


@given(st.sets(topic_names(), max_size=30), st.lists(st.one_of(topic_filters(), topic_names()), min_size=1))
def test_matching_agrees_with_reference(names: set[str], filters: list[str]) -> None:
    tree = TopicTree()
    for name in names:
        tree.add(name)
    for topic_filter in filters:
        found = list(tree.matching(topic_filter))
        assert len(found) == len(set(found)), f"a name was yielded twice for {topic_filter!r}: {found}"
        assert set(found) == {name for name in names if matches(topic_filter, name)}, topic_filter


@given(st.lists(st.tuples(st.booleans(), topic_names()), max_size=40))
def test_add_discard_sequences_follow_a_model(ops: list[tuple[bool, str]]) -> None:
    tree = TopicTree()
    model: set[str] = set()
    for is_add, name in ops:
        if is_add:
            assert tree.add(name) is (name not in model)
            model.add(name)
        else:
            assert tree.discard(name) is (name in model)
            model.discard(name)
        assert len(tree) == len(model)
        for probe in ("a", "a/b", "", "/", "$SYS", name):
            assert (probe in tree) is (probe in model)
        assert sorted(tree.matching("#")) == sorted(n for n in model if not n.startswith("$"))
    for name in model:
        assert tree.discard(name)
    assert len(tree) == 0
    assert tree.node_count() == 0


def test_hash_includes_the_parent_level_and_skips_dollar_names() -> None:
    tree = TopicTree()
    for name in ("sport", "sport/tennis", "sport/tennis/player1", "$SYS/broker", "$SYS", "other"):
        tree.add(name)
    assert sorted(tree.matching("sport/#")) == ["sport", "sport/tennis", "sport/tennis/player1"]
    assert sorted(tree.matching("#")) == ["other", "sport", "sport/tennis", "sport/tennis/player1"]
    assert sorted(tree.matching("+")) == ["other", "sport"]
    assert sorted(tree.matching("$SYS/#")) == ["$SYS", "$SYS/broker"]
    assert sorted(tree.matching("+/broker")) == []
    assert list(tree.matching("sport/+/player1")) == ["sport/tennis/player1"]


def test_tree_rejects_illegal_names_and_filters() -> None:
    tree = TopicTree()
    with pytest.raises(TopicError, match="wildcard"):
        tree.add("a/+")
    with pytest.raises(TopicError, match="must be the last level"):
        tree.matching("a/#/b")
    assert 42 not in tree
    assert tree.discard("never") is False
    assert len(tree) == 0


def test_discarding_during_iteration_of_a_collected_list() -> None:
    tree = TopicTree()
    for name in ("a/1", "a/2", "a/3", "b"):
        tree.add(name)
    for name in list(tree.matching("a/+")):
        tree.discard(name)
    assert sorted(tree.matching("#")) == ["b"]
    assert tree.node_count() == 1
