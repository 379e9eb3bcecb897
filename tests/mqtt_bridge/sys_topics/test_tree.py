"""The $SYS tree without sockets (mqtt_bridge/sys_topics/tree.py): which topics an update publishes, and the load
averages checked against plain references (a closed form, and the average written as a weighted sum of the rates)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mqtt_bridge.sys_topics.tree import LOAD_FIGURES, BrokerFigures, SysTree

P = "$SYS/broker/"


def test_the_first_update_publishes_every_topic_with_loads_at_zero():
    tree = SysTree("1.2.3", started_s=100.0)
    changed = tree.update(112.9, BrokerFigures(clients_connected=2, sessions=3, packets_received=7, retained=4))
    assert changed[P + "version"] == "mqgate version 1.2.3"
    assert changed[P + "uptime"] == "12 seconds"
    assert changed[P + "clients/connected"] == "2"
    assert changed[P + "clients/total"] == "3"
    assert changed[P + "clients/disconnected"] == "1"
    assert changed[P + "clients/maximum"] == "3"
    assert changed[P + "messages/received"] == "7"
    assert changed[P + "retained messages/count"] == "4"
    loads = {topic for topic in changed if topic.startswith(P + "load/")}
    assert len(loads) == len(LOAD_FIGURES) * 3
    assert {changed[topic] for topic in loads} == {"0.00"}
    assert P + "load/messages/received/1min" in loads and P + "load/connections/15min" in loads
    assert tree.values == changed


def test_later_updates_publish_uptime_and_what_changed_only():
    tree = SysTree("1", started_s=0.0)
    tree.update(10.0, BrokerFigures(sessions=5, clients_connected=5))
    changed = tree.update(20.0, BrokerFigures(sessions=2, clients_connected=1))
    assert changed[P + "uptime"] == "20 seconds"
    assert changed[P + "clients/connected"] == "1" and changed[P + "clients/total"] == "2"
    assert P + "clients/maximum" not in changed  # still 5
    assert P + "version" not in changed and P + "bytes/sent" not in changed
    assert not any(topic.startswith(P + "load/") for topic in changed)  # nothing moved
    assert tree.values[P + "clients/maximum"] == "5"


def test_a_constant_rate_approaches_it_as_one_minus_exp():
    tree = SysTree("1", started_s=0.0)
    tree.update(0.0, BrokerFigures())
    # 600 packets a minute (10/s), sampled every 10 s for 3 minutes.
    for step in range(1, 19):
        tree.update(step * 10.0, BrokerFigures(packets_received=step * 100))
        for window, name in ((60, "1min"), (300, "5min"), (900, "15min")):
            expected = 600 * (1 - math.exp(-step * 10.0 / window))
            assert float(tree.values[f"{P}load/messages/received/{name}"]) == two_decimals(expected)


def two_decimals(value: float) -> object:
    return pytest.approx(value, abs=0.0051)  # the payload has two decimals


@given(
    st.lists(
        st.tuples(st.integers(1, 120), st.integers(0, 50_000)),  # (seconds, messages received in them)
        min_size=1,
        max_size=30,
    )
)
def test_load_averages_match_a_weighted_sum_of_the_rates(steps):
    tree = SysTree("1", started_s=0.0)
    tree.update(0.0, BrokerFigures())
    now, total = 0.0, 0
    internal = []  # the exact averages, whatever was published
    for seconds, count in steps:
        now += seconds
        total += count
        tree.update(now, BrokerFigures(publishes_received=total))
        internal.append(tree._loads["load/publish/received/5min"])
    # Reference: the average after n intervals is sum_i r_i * (1 - a_i) * prod_{j > i} a_j, a_i = exp(-t_i / W).
    rates = [count * 60.0 / seconds for seconds, count in steps]
    decays = [math.exp(-seconds / 300.0) for seconds, _ in steps]
    for n in range(1, len(steps) + 1):
        expected = sum(rates[i] * (1 - decays[i]) * math.prod(decays[i + 1 : n]) for i in range(n))
        assert math.isclose(internal[n - 1], expected, rel_tol=1e-9, abs_tol=1e-6)
    # Published (and held for new subscribers): the last average that moved by 0.01 or more from the one before.
    published = 0.0
    for previous, current in zip([0.0, *internal], internal, strict=False):
        if abs(current - previous) >= 0.01:
            published = current
    assert tree.values[P + "load/publish/received/5min"] == f"{published:.2f}"
