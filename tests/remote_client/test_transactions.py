"""The remote TransactionProducer against an in-process cluster: a half message committed, rolled back, or left
unknown and settled by the broker's check-back over the producer's connection, as core's TransactionProducer."""

from __future__ import annotations

import asyncio

import pytest

from core import IllegalArgumentError, LocalTransactionState, PullStatus, SendStatus
from remote_client import Cluster
from remote_client.transaction_producer import TransactionProducer
from tests.remote_client.conftest import LocalCluster

QUICK_CHECKS = {"transaction_timeout_ms": 1000, "transaction_check_interval_ms": 1000}


async def visible(
    local_cluster: LocalCluster, broker_name: str, topic: str, queue_id: int, wait_s: float
) -> list[bytes]:
    broker = local_cluster.groups[broker_name].broker
    got = await broker.pull("tx_reader", topic, queue_id, 0, 32, None, round(wait_s * 1000))
    return [m.body for m in got.messages] if got.status is PullStatus.FOUND else []


async def test_commit_and_rollback_end_the_half_at_the_group_that_holds_it(local_cluster: LocalCluster):
    await local_cluster.create_topic("tx", 1)
    async with Cluster(local_cluster.namesrv_address) as cluster:
        producer = TransactionProducer(cluster, "tx_producer", lambda message: LocalTransactionState.UNKNOW)
        with pytest.raises(IllegalArgumentError, match="start"):
            await producer.send_message_in_transaction("tx", b"x", lambda m, a: None)
        await producer.start()
        seen = []

        def commit(message, arg):
            seen.append((message.properties["__transactionId__"], arg))
            return LocalTransactionState.COMMIT_MESSAGE

        committed = await producer.send_message_in_transaction("tx", b"kept", commit, arg=7)
        assert committed.status is SendStatus.SEND_OK
        assert committed.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE
        assert seen == [(committed.transaction_id, 7)]
        queue = committed.message_queue
        assert await visible(local_cluster, queue.broker_name, "tx", queue.queue_id, 5) == [b"kept"]
        rolled = await producer.send_message_in_transaction(
            "tx", b"gone", lambda m, a: LocalTransactionState.ROLLBACK_MESSAGE
        )
        assert rolled.local_transaction_state is LocalTransactionState.ROLLBACK_MESSAGE
        other = rolled.message_queue
        assert b"gone" not in await visible(local_cluster, other.broker_name, "tx", other.queue_id, 0.5)
        await producer.shutdown()


async def test_an_unknown_transaction_is_settled_by_the_check_back_over_the_producers_connection(
    local_cluster: LocalCluster,
):
    for name in list(local_cluster.groups):
        await local_cluster.groups.pop(name).close()
    await local_cluster.add_group("broker-c", **QUICK_CHECKS)
    await local_cluster.create_topic("tx_check", 1)
    checked = asyncio.get_running_loop().create_future()

    def checker(message):  # a plain function: it runs in a worker thread, as RocketMQ's check executor
        checked.get_loop().call_soon_threadsafe(checked.set_result, message)
        return LocalTransactionState.COMMIT_MESSAGE

    async with Cluster(local_cluster.namesrv_address) as cluster:
        producer = TransactionProducer(cluster, "tx_checked", checker)
        await producer.start()
        sent = await producer.send_message_in_transaction("tx_check", b"later", lambda m, a: None)
        assert sent.local_transaction_state is LocalTransactionState.UNKNOW
        message = await asyncio.wait_for(checked, 30)
        assert message.body == b"later" and message.properties["__transactionId__"] == sent.transaction_id
        assert await visible(local_cluster, "broker-c", "tx_check", 0, 10) == [b"later"]
        await producer.shutdown()
