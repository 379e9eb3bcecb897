"""A real `mqgate serve` driven by the C++ RocketMQ 4 client (rocketmq-client-python 0.5.0rc2), pointed at the
embedded NameServer as applications point it at Apache RocketMQ's: sends of every kind, push consumers in
clustering, broadcasting and orderly mode, retries into the dead-letter topic, and a transaction decided by the
broker's check-back."""

from __future__ import annotations

import time

import pytest

from tests.broker_remoting import cpp_clients
from tests.proxy.serving import start, write_groups

pytestmark = pytest.mark.slow

# Fast schedules, so that retries and check-backs come within seconds: every delay level 1 s; a half message is
# checked 1 s after its send, then every second.
CONFIG = """
[broker]
message_delay_level = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"
transaction_timeout_ms = 1000
transaction_check_interval_ms = 1000
"""


@pytest.fixture(scope="module")
def namesrv(tmp_path_factory):
    data_dir = tmp_path_factory.mktemp("cpp") / "data"
    write_groups(data_dir, {"cg_retry": {"retryMaxTimes": 2}})
    serve = start(data_dir, config=CONFIG)
    yield f"127.0.0.1:{serve.ready['namesrv'].rpartition(':')[2]}"
    assert serve.stop() == 0


def bodies(lines):
    return sorted(line["body"] for line in lines if "body" in line)


def test_sync_oneway_orderly_batch_and_delayed_sends_reach_a_push_consumer(namesrv):
    sent = []
    sent += cpp_clients.run(namesrv, "send", "t_kinds", "--mode", "sync", "--count", 3, "--body", "sync", "--tags", "a")
    sent += cpp_clients.run(namesrv, "send", "t_kinds", "--mode", "oneway", "--count", 2, "--body", "oneway")
    sent += cpp_clients.run(namesrv, "send", "t_kinds", "--mode", "orderly", "--count", 3, "--body", "orderly")
    sent += cpp_clients.run(namesrv, "send", "t_kinds", "--mode", "batch", "--count", 3, "--body", "batch")
    before = time.monotonic()
    sent += cpp_clients.run(namesrv, "send", "t_kinds", "--delay-level", 2, "--body", "delayed")
    assert all(result["status"] == 0 for result in sent)  # SEND_OK
    got = cpp_clients.run(namesrv, "consume", "t_kinds", "cg_kinds", "--expect", 12, "--seconds", 60)
    expected = [f"{kind}-{n}" for kind, count in (("sync", 3), ("oneway", 2), ("orderly", 3), ("batch", 3))
                for n in range(count)] + ["delayed-0"]  # fmt: skip
    assert bodies(got) == sorted(expected)
    assert time.monotonic() - before >= 1.0  # the delayed one waited its level
    orderly = [line for line in got if line["body"].startswith("orderly")]
    assert len({line["queue_id"] for line in orderly}) == 1  # one sharding key, one queue, in order
    assert [line["body"] for line in sorted(orderly, key=lambda line: line["queue_offset"])] == [
        "orderly-0", "orderly-1", "orderly-2",
    ]  # fmt: skip
    assert {line["tags"] for line in got if line["body"].startswith("sync")} == {"a"}


def test_two_clustering_members_share_the_queues_and_broadcasting_members_each_get_all(namesrv):
    cpp_clients.run(namesrv, "send", "t_share", "--count", 1, "--body", "warm")  # the topic exists, with 4 queues
    members = [
        cpp_clients.start(namesrv, "consume", "t_share", "cg_share", "--instance", name, "--seconds", 24)
        for name in ("one", "two")
    ]
    broadcast = [
        cpp_clients.start(namesrv, "consume", "t_share", "cg_all", "--model", "broadcasting", "--instance", name,
                          "--seconds", 24, "--want", 16, "--want-prefix", "shared")
        for name in ("b1", "b2")
    ]  # fmt: skip
    time.sleep(8)  # both members have joined and rebalanced (a loaded machine starts a client slowly)
    cpp_clients.run(namesrv, "send", "t_share", "--count", 16, "--body", "shared")
    got = [cpp_clients.finish(member) for member in members]
    shared = [sorted(line["body"] for line in lines if line["body"].startswith("shared")) for lines in got]
    assert sorted(shared[0] + shared[1]) == sorted(f"shared-{n}" for n in range(16))
    assert shared[0] and shared[1]  # each member held some of the queues
    for process in broadcast:
        lines = cpp_clients.finish(process)
        assert sorted(line["body"] for line in lines if line["body"].startswith("shared")) == sorted(
            f"shared-{n}" for n in range(16)
        )


def test_an_orderly_consumer_gets_one_key_in_order(namesrv):
    cpp_clients.run(namesrv, "send", "t_order", "--mode", "orderly", "--count", 6, "--key", "k1", "--body", "o")
    got = cpp_clients.run(namesrv, "consume", "t_order", "cg_order", "--orderly", "--expect", 6, "--seconds", 60)
    assert [line["body"] for line in got] == [f"o-{n}" for n in range(6)]


def test_a_message_consumed_later_comes_back_from_the_retry_topic_then_lands_in_the_dead_letter_topic(namesrv):
    cpp_clients.run(namesrv, "send", "t_retry", "--body", "failing")
    # cg_retry allows 2 retries: the first delivery and two from %RETRY%cg_retry, then %DLQ%cg_retry.
    got = cpp_clients.run(namesrv, "consume", "t_retry", "cg_retry", "--later", 100, "--seconds", 15)
    deliveries = [line for line in got if line["body"] == "failing-0"]
    assert [line["reconsume_times"] for line in deliveries][:3] == [0, 1, 2]
    assert len(deliveries) == 3
    dead = cpp_clients.run(namesrv, "consume", "%DLQ%cg_retry", "cg_dlq_reader", "--expect", 1, "--seconds", 30)
    assert [line["body"] for line in dead] == ["failing-0"]


def test_a_transaction_left_unknown_is_committed_by_the_producers_check_back(namesrv):
    lines = cpp_clients.run(
        namesrv, "transaction", "t_tx", "pg_tx", "--state", "unknown", "--check", "commit", "--seconds", 30, "--body",
        "tx",
    )  # fmt: skip
    assert lines[0]["status"] == 0
    assert {"checked": "tx-0"} in lines[1:]
    cpp_clients.run(namesrv, "transaction", "t_tx", "pg_tx", "--state", "rollback", "--body", "rolled", "--seconds", 0)
    got = cpp_clients.run(namesrv, "consume", "t_tx", "cg_tx", "--expect", 1, "--seconds", 30)
    time.sleep(0)
    assert bodies(got) == ["tx-0"]
