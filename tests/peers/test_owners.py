"""Owners of work among the live groups: the same on every node, spread, and moved only as far as a group's coming
or going asks."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from peers.owners import owned, owner

WORKS = [f"default/rule-{n}/target" for n in range(3000)]
groups_strategy = st.lists(st.text("abcdefgh-", min_size=1, max_size=8), min_size=1, max_size=6, unique=True)


def test_no_group_no_owner():
    assert owner("work", []) is None


@given(groups_strategy, st.text(max_size=20))
def test_the_owner_is_a_live_group_whatever_order_the_groups_are_listed_in(groups, work):
    assert owner(work, groups) in groups
    assert owner(work, list(reversed(groups))) == owner(work, groups)
    assert owner(work, sorted(groups)) == owner(work, groups)


@given(groups_strategy.filter(lambda groups: len(groups) >= 2), st.data())
def test_a_group_that_goes_takes_only_its_own_works_with_it(groups, data):
    gone = data.draw(st.sampled_from(groups))
    remaining = [group for group in groups if group != gone]
    for work in WORKS[:300]:
        before, after = owner(work, groups), owner(work, remaining)
        if before != gone:
            assert after == before, "a work of a group still live moved"


def test_works_are_spread_over_the_groups():
    groups = ["broker-a", "broker-b", "broker-c"]
    shares = [len(owned(WORKS, groups, group)) for group in groups]
    assert sum(shares) == len(WORKS)
    assert all(800 < share < 1200 for share in shares), shares
