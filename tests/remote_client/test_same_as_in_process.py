"""The remote client against the in-process one (hypothesis state machine): the same sequence of sends, pulls, pops,
acks, changes of invisible time and offset commits, run by core's Producer, PullConsumer and SimpleConsumer on a
broker in the test's process and by remote_client's on a broker group reached over remoting (one NameServer, one
group: the same four queues), gives the same results and the same errors.

Compared: a send's status, queue and queue offset; a pull's status, offsets and messages (body, tags, keys, queue
offset, properties the producer set); a receive's messages and delivery attempts; what an ack or a change of
invisible time answers (or the class of its error); committed offsets. Not compared: message ids and store hosts,
which name different processes.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import core
from broker_remoting.config import RemotingConfig
from broker_remoting.door import BrokerRemoting
from core import Broker, BrokerConfig, ConsumeFromWhere, MessageQueue, Perm
from namesrv.server import NameServer
from remote_client import Cluster
from remote_client import Producer as RemoteProducer
from remote_client import PullConsumer as RemotePullConsumer
from remote_client import SimpleConsumer as RemoteSimpleConsumer
from tests.core.conftest import open_broker_store

TOPIC = "same"
QUEUES = 4
GROUP = "readers"
POPPERS = "poppers"
TAGS = st.sampled_from(["a", "b"])
USER_PROPERTIES = ("TAGS", "KEYS", "colour")


def _message_facts(message: Any) -> tuple[Any, ...]:
    return (message.body, message.queue_id, message.queue_offset,
            {k: v for k, v in message.properties.items() if k in USER_PROPERTIES})  # fmt: skip


async def _outcome(call: Any) -> tuple[str, Any]:
    """("ok", value) or ("error", the error's class name)."""
    try:
        return "ok", await call
    except core.CoreError as exc:
        return "error", type(exc).__name__


class Side:
    """One side's broker and clients: in process, or over remoting."""

    producer: Any
    puller: Any
    popper: Any
    closers: list[Any]

    async def pull(self, queue_id: int, offset: int) -> Any:
        queue = MessageQueue(TOPIC, self.broker_name, queue_id)
        result = await self.puller.pull(queue, offset, 4, long_poll_ms=0)
        return (result.status, result.next_begin_offset, result.min_offset, result.max_offset,
                [_message_facts(m) for m in result.messages])  # fmt: skip

    async def committed(self, queue_id: int) -> int:
        value = self.puller.committed(MessageQueue(TOPIC, self.broker_name, queue_id))
        return await value if asyncio.iscoroutine(value) else value

    broker_name = "broker-a"


class Machine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.root = Path(tempfile.mkdtemp(prefix="same-as-in-process-"))
        self.sides: list[Side] = []
        self.held: list[tuple[Any, Any]] = []  # views received on both sides, paired
        self.sent = 0

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    @initialize()
    def start(self) -> None:
        self.sides = [self.run(self._local()), self.run(self._remote())]

    async def _broker(self, directory: Path) -> tuple[Broker, Any]:
        store = open_broker_store(directory)
        broker = Broker(store, directory / "config", BrokerConfig(broker_name="broker-a"))
        await broker.start()
        broker.admin.create_topic(TOPIC, QUEUES, QUEUES, Perm.READ | Perm.WRITE)
        return broker, store

    async def _local(self) -> Side:
        broker, store = await self._broker(self.root / "local")
        side = Side()
        side.producer = core.Producer(broker, "p")
        side.puller = core.PullConsumer(broker, GROUP, consume_from=ConsumeFromWhere.FIRST_OFFSET)
        side.popper = core.SimpleConsumer(broker, POPPERS, {TOPIC: "*"}, await_duration_s=0)

        async def close() -> None:
            await broker.close()
            store.close()

        side.closers = [close]
        return side

    async def _remote(self) -> Side:
        broker, store = await self._broker(self.root / "remote")
        namesrv = NameServer()
        port = await namesrv.start("127.0.0.1", 0)
        door = BrokerRemoting(broker, RemotingConfig(host="127.0.0.1", port=0), max_body_bytes=1 << 20)
        await door.start([f"127.0.0.1:{port}"])
        assert door.registration is not None
        await asyncio.wait_for(door.registration.registered.wait(), 10)
        cluster = Cluster(f"127.0.0.1:{port}")
        await cluster.start()
        side = Side()
        side.producer = RemoteProducer(cluster, "p")
        side.puller = RemotePullConsumer(cluster, GROUP, consume_from=ConsumeFromWhere.FIRST_OFFSET)
        side.popper = RemoteSimpleConsumer(cluster, POPPERS, {TOPIC: "*"}, await_duration_s=0)
        await side.popper.start()

        async def close() -> None:
            await cluster.close()
            await door.close()
            await namesrv.close()
            await broker.close()
            store.close()

        side.closers = [close]
        return side

    def both(self, call: Any) -> list[Any]:
        async def each() -> list[Any]:
            return [await _outcome(call(side)) for side in self.sides]

        return self.run(each())

    @rule(body=st.binary(max_size=64), tags=TAGS, keys=st.sampled_from([None, "k1", "k2"]))
    def send(self, body: bytes, tags: str, keys: str | None) -> None:
        results = self.both(lambda side: side.producer.send(TOPIC, body, tags=tags, keys=keys,
                                                            properties={"colour": "red"}))  # fmt: skip
        facts = [
            (kind, (value.status, value.message_queue.queue_id, value.queue_offset) if kind == "ok" else value)
            for kind, value in results
        ]
        assert facts[0] == facts[1]
        self.sent += 1

    @rule(queue_id=st.integers(0, QUEUES - 1), offset=st.integers(-1, 6))
    def pull(self, queue_id: int, offset: int) -> None:
        async def settled(side: Side) -> Any:
            # The store dispatches a send to its queue a moment later: read what both sides have dispatched.
            for _ in range(50):
                got = await side.pull(queue_id, offset)
                if got[3] >= self._expected_max(queue_id):
                    return got
                await asyncio.sleep(0.01)
            return got

        local, remote = self.both(settled)
        assert local == remote

    def _expected_max(self, queue_id: int) -> int:
        # Sends go round the four queues in turn on both sides.
        return self.sent // QUEUES + (1 if queue_id < self.sent % QUEUES else 0)

    @rule(queue_id=st.integers(0, QUEUES - 1), offset=st.integers(0, 8))
    def commit(self, queue_id: int, offset: int) -> None:
        for side in self.sides:
            side.puller.commit(MessageQueue(TOPIC, side.broker_name, queue_id), offset)
        local, remote = self.both(lambda side: side.committed(queue_id))
        assert local == remote

    @rule(queue_id=st.integers(0, QUEUES - 1))
    def committed(self, queue_id: int) -> None:
        local, remote = self.both(lambda side: side.committed(queue_id))
        assert local == remote

    @rule(count=st.integers(1, 4))
    def receive(self, count: int) -> None:
        async def settled(side: Side) -> Any:
            await asyncio.sleep(0.05)  # both stores dispatch what was sent
            return await side.popper.receive(count, 60)

        (local_kind, local), (remote_kind, remote) = self.both(settled)
        assert local_kind == remote_kind
        if local_kind == "ok":
            assert [(_message_facts(v.message), v.delivery_attempt) for v in local] == [
                (_message_facts(v.message), v.delivery_attempt) for v in remote
            ]
            self.held += list(zip(local, remote, strict=True))

    @precondition(lambda self: self.held)
    @rule(index=st.integers(0, 31), twice=st.booleans())
    def ack(self, index: int, twice: bool) -> None:
        local_view, remote_view = self.held[index % len(self.held)]
        views = {id(self.sides[0]): local_view, id(self.sides[1]): remote_view}
        for _ in range(2 if twice else 1):
            outcomes = self.both(lambda side: side.popper.ack(views[id(side)]))
            assert outcomes[0] == outcomes[1]

    @precondition(lambda self: self.held)
    @rule(index=st.integers(0, 31), seconds=st.sampled_from([0, 30]))
    def change_invisible(self, index: int, seconds: int) -> None:
        position = index % len(self.held)
        local_view, remote_view = self.held[position]
        views = {id(self.sides[0]): local_view, id(self.sides[1]): remote_view}
        (local_kind, local), (remote_kind, remote) = self.both(
            lambda side: side.popper.change_invisible_duration(views[id(side)], seconds)
        )
        assert local_kind == remote_kind
        if local_kind == "ok":
            self.held.append((local, remote))
        else:
            assert local == remote

    @invariant()
    def nothing_held_twice(self) -> None:
        assert len({id(pair[0]) for pair in self.held}) == len(self.held)

    def teardown(self) -> None:
        async def close() -> None:
            for side in self.sides:
                for closer in side.closers:
                    await closer()

        try:
            self.run(close())
        finally:
            self.loop.close()
            shutil.rmtree(self.root, ignore_errors=True)


Machine.TestCase.settings = settings(max_examples=15, stateful_step_count=25, deadline=None)
test_the_remote_client_answers_as_the_in_process_one = Machine.TestCase
