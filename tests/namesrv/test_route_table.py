"""The NameServer's tables without I/O (namesrv/route_table.py): registration, routes, slaves following their
master, topics leaving with a new data version, and brokers removed when silent, gone or unregistered; checked
against a plain model under generated operations."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from namesrv.route_table import BROKER_TIMEOUT_MS, QueueData, RouteTable

Q4 = QueueData(4, 4, 6)
Q8 = QueueData(8, 8, 6)


def test_a_master_registers_its_topics_and_a_client_gets_the_route():
    table = RouteTable()
    registered = table.register("c", "b1", "10.0.0.1:10911", 0, "10.0.0.1:10912", {"t": Q4, "TBW102": Q8}, 1, 0)
    assert registered.master_address == ""
    assert table.route("t") == {
        "queueDatas": [{"brokerName": "b1", "readQueueNums": 4, "writeQueueNums": 4, "perm": 6, "topicSysFlag": 0}],
        "brokerDatas": [{"cluster": "c", "brokerName": "b1", "brokerAddrs": {"0": "10.0.0.1:10911"}}],
        "filterServerTable": {},
    }
    assert table.route("unknown") is None
    assert table.topic_names() == ["TBW102", "t"] and table.topic_names("c") == ["TBW102", "t"]
    assert table.topic_names("other") == []


def test_a_slave_adds_its_address_and_learns_its_master():
    table = RouteTable()
    table.register("c", "b1", "m:1", 0, "m:2", {"t": Q4}, {"counter": 1}, 0)
    registered = table.register("c", "b1", "s:1", 1, "s:2", {"t": Q8, "slave-only": Q8}, {"counter": 9}, 0)
    assert (registered.master_address, registered.ha_server_address) == ("m:1", "m:2")
    route = table.route("t")
    assert route is not None and route["brokerDatas"][0]["brokerAddrs"] == {"0": "m:1", "1": "s:1"}
    assert route["queueDatas"][0]["readQueueNums"] == 4  # a slave's topics change nothing
    assert table.route("slave-only") is None


def test_topics_follow_the_masters_data_version():
    table = RouteTable()
    table.register("c", "b1", "m:1", 0, "", {"a": Q4, "b": Q4}, {"counter": 1}, 0)
    table.register("c", "b1", "m:1", 0, "", {"a": Q8}, {"counter": 1}, 1)  # same version: nothing changed
    assert table.topic_names() == ["a", "b"]
    table.register("c", "b1", "m:1", 0, "", {"a": Q8}, {"counter": 2}, 2)
    assert table.topic_names() == ["a"]
    route = table.route("a")
    assert route is not None and route["queueDatas"][0]["writeQueueNums"] == 8


def test_silent_closed_and_unregistered_brokers_leave_the_routes():
    table = RouteTable()
    channel = object()
    table.register("c", "b1", "m:1", 0, "", {"t": Q4}, 1, 0, channel)
    table.register("c", "b2", "n:1", 0, "", {"t": Q4}, 1, 0)
    table.register("c", "b3", "o:1", 0, "", {"u": Q4}, 1, 0, timeout_ms=10_000)
    assert table.heard("n:1", 100_000) and not table.heard("nobody:1", 0)
    assert table.expire(BROKER_TIMEOUT_MS + 1) == ["m:1", "o:1"]  # b2 was heard since
    route = table.route("t")
    assert route is not None and [broker["brokerName"] for broker in route["brokerDatas"]] == ["b2"]
    assert table.route("u") is None and table.cluster_info()["clusterAddrTable"] == {"c": ["b2"]}
    table.register("c", "b1", "m:1", 0, "", {"t": Q4}, 1, 0, channel)
    assert table.channel_closed(channel) == ["m:1"]
    assert not table.unregister("b2", "n:1", 1)  # not its id
    assert table.unregister("b2", "n:1", 0)
    assert table.route("t") is None and table.cluster_info() == {
        "brokerAddrTable": {},
        "clusterAddrTable": {},
        "brokerLiveTable": {},
    }


def test_an_address_that_changes_its_id_keeps_one_entry():
    table = RouteTable()
    table.register("c", "b1", "a:1", 1, "", {}, 1, 0)
    table.register("c", "b1", "a:1", 0, "", {"t": Q4}, 1, 0)  # the slave became the master
    assert table.brokers["b1"].addresses == {0: "a:1"}


operations = st.lists(
    st.one_of(
        st.tuples(
            st.just("register"),
            st.sampled_from(["b1", "b2"]),
            st.integers(0, 1),
            st.sets(st.sampled_from(["t", "u", "v"])),
            st.integers(0, 2),
        ),
        st.tuples(st.just("unregister"), st.sampled_from(["b1", "b2"]), st.integers(0, 1)),
        st.tuples(st.just("expire"), st.integers(0, 3)),
    ),
    max_size=30,
)


@given(operations)
def test_routes_agree_with_a_plain_model(ops):
    table = RouteTable()
    now = 0
    # The model: live brokers (name, id) -> last heard; each group's topics as its master last registered them.
    live: dict[tuple[str, int], int] = {}
    topics: dict[str, set[str]] = {}
    versions: dict[tuple[str, int], int] = {}
    for op in ops:
        now += 1000
        if op[0] == "register":
            _, name, broker_id, names, version = op
            address = f"{name}-{broker_id}:1"
            table.register("c", name, address, broker_id, "", {topic: Q4 for topic in names}, version, now)
            if (broker_id == 0 and versions.get((name, 0)) != version) or ((name, 0) not in live and broker_id == 0):
                topics[name] = set(names)
            live[(name, broker_id)] = now
            versions[(name, broker_id)] = version
        elif op[0] == "unregister":
            _, name, broker_id = op
            table.unregister(name, f"{name}-{broker_id}:1", broker_id)
            live.pop((name, broker_id), None)
            versions.pop((name, broker_id), None)
        else:
            now += op[1] * 60_000
            table.expire(now)
            for key in [key for key, heard in live.items() if now - heard > BROKER_TIMEOUT_MS]:
                del live[key]
                versions.pop(key, None)
        for name in ("b1", "b2"):
            if not any(key[0] == name for key in live):
                topics.pop(name, None)
        for topic in ("t", "u", "v"):
            route = table.route(topic)
            expected = sorted(name for name, names in topics.items() if topic in names)
            got = [queue["brokerName"] for queue in route["queueDatas"]] if route else []
            assert got == expected, (op, topic)
            if route:
                for broker in route["brokerDatas"]:
                    ids = sorted(int(i) for i in broker["brokerAddrs"])
                    assert ids == sorted(i for n, i in live if n == broker["brokerName"])
