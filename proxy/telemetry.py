"""The Telemetry stream: each client's settings, its liveness, and the server's commands to it.

A client opens one stream per endpoint and sends its Settings (what it is: producer with the topics it publishes,
push or simple consumer with its group and subscriptions); it gets them back merged with the server's
(proxy.client_settings), again whenever it sends them. A push consumer waits for that answer before it starts.

While a producer's stream is open it answers check-backs of the topics it publishes: an undecided transaction of
such a topic (the producer group of a gRPC half message is its topic, as in RocketMQ's proxy) is sent to one of
them as a RecoverOrphanedTransactionCommand, whose answer comes back as an EndTransaction (proxy.service).

ThreadStackTrace and VerifyMessageResult commands from a client answer commands the server never sends yet (it
asks for no stack trace and verifies nothing); they are accepted and logged. A stream that ends ends the client's
check-backs; the client's session itself ends with NotifyClientTermination or its expiry (proxy.client_sessions).

A consumer's settings make it a live member of its group (Broker.join_group: POP for push and simple consumers,
which pop; PULL for a pull consumer, which holds its own offsets), until its session ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

import grpc

from core import Broker, ConsumeType, TransactionCheck
from proxy.client_sessions import ClientSession, ClientSessions
from proxy.client_settings import consumer_settings, producer_settings
from proxy.held_messages import Held
from proxy.message_codec import to_proto
from proxy.status_codes import RequestError, ok, status_of
from proxy.stubs import ClientType, Code, Settings, TelemetryCommand, service_pb2

log = logging.getLogger(__name__)

CLIENT_ID_METADATA = "x-mq-client-id"
# How often silent sessions are looked for (RocketMQ's channel scan: every 10 s).
EXPIRY_SCAN_S = 10.0
CONSUMERS = (ClientType.PUSH_CONSUMER, ClientType.SIMPLE_CONSUMER, ClientType.PULL_CONSUMER)


class Telemetry:
    def __init__(self, broker: Broker, *, max_body_bytes: int, release: Callable[[str, list[Held]], None]) -> None:
        self.broker = broker
        self.max_body_bytes = max_body_bytes
        self.sessions = ClientSessions()
        self._release = release
        self._expirer: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._expirer = asyncio.get_running_loop().create_task(self._expire())

    async def close(self) -> None:
        if self._expirer is not None:
            self._expirer.cancel()
            await asyncio.gather(self._expirer, return_exceptions=True)
        for session in self.sessions:
            await self.end_session(session.client_id)

    @staticmethod
    def client_id(context: grpc.aio.ServicerContext, required: bool = True) -> str:
        for key, value in context.invocation_metadata() or ():
            if key == CLIENT_ID_METADATA and value:
                return str(value)
        if required:
            raise RequestError(Code.CLIENT_ID_REQUIRED, f"the request has no {CLIENT_ID_METADATA} metadata")
        return ""

    async def end_session(self, client_id: str) -> None:
        """The client is gone: no more check-backs to it, its held messages are let go. Its Telemetry stream is left
        for the client to close (it does right after; the official Python client logs an error when the server
        ends the stream first)."""
        session = self.sessions.remove(client_id)
        if session is None:
            return
        self._unregister_checkers(session)
        self._leave_group(session)
        self._release(client_id, session.held.release_all())

    async def _expire(self) -> None:
        while True:
            await asyncio.sleep(EXPIRY_SCAN_S)
            for session in self.sessions.take_expired():
                silent = self.sessions.expire_after_s
                log.info("client %s silent for %.0f s: its session ends", session.client_id, silent)
                self._unregister_checkers(session)
                self._leave_group(session)
                self._release(session.client_id, session.held.release_all())

    # --- the stream ---------------------------------------------------------------------------------------------

    async def serve(
        self,
        client_id: str,
        requests: AsyncIterator[TelemetryCommand],
        check_settings: Callable[[Settings], None],
    ) -> AsyncIterator[TelemetryCommand]:
        session = self.sessions.touch(client_id)
        outbox: asyncio.Queue[TelemetryCommand | None] = asyncio.Queue()
        if session.outbox is not None:
            session.outbox.put_nowait(None)  # the client opened a new stream: the old one ends
        session.outbox = outbox
        reader = asyncio.get_running_loop().create_task(self._read(session, requests, check_settings, outbox))
        try:
            while True:
                command = await outbox.get()
                if command is None:
                    return
                yield command
        finally:
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader
            if session.outbox is outbox:
                session.outbox = None
                self._unregister_checkers(session)

    async def _read(
        self,
        session: ClientSession,
        requests: AsyncIterator[TelemetryCommand],
        check_settings: Callable[[Settings], None],
        outbox: asyncio.Queue[TelemetryCommand | None],
    ) -> None:
        try:
            async for command in requests:
                self.sessions.touch(session.client_id)
                which = command.WhichOneof("command")
                if which == "settings":
                    try:
                        check_settings(command.settings)
                        answer = self._settings(session, command.settings)
                    except Exception as exc:
                        outbox.put_nowait(TelemetryCommand(status=status_of(exc)))
                    else:
                        outbox.put_nowait(TelemetryCommand(status=ok(), settings=answer))
                elif which == "thread_stack_trace":
                    log.info("client %s: thread stack trace %s", session.client_id, command.thread_stack_trace.nonce)
                elif which == "verify_message_result":
                    log.info("client %s: verified message %s", session.client_id, command.verify_message_result.nonce)
                else:
                    log.debug("client %s: telemetry command %s ignored", session.client_id, which)
        except (grpc.aio.AioRpcError, asyncio.InvalidStateError) as exc:
            log.debug("client %s: telemetry stream ended (%s)", session.client_id, exc)
        finally:
            outbox.put_nowait(None)

    def _settings(self, session: ClientSession, given: Settings) -> Settings:
        client_type = given.client_type
        if client_type == ClientType.PRODUCER or given.HasField("publishing"):
            session.client_type = ClientType.PRODUCER
            session.settings = given
            self._register_checkers(session, {t.name for t in given.publishing.topics})
            return producer_settings(given, self.max_body_bytes)
        if client_type in CONSUMERS:
            group = given.subscription.group.name
            config = self.broker.groups.get_or_auto_create(group)
            for entry in given.subscription.subscriptions:
                self.broker.topic_config(entry.topic.name)  # TOPIC_NOT_FOUND now rather than at the first receive
            session.client_type = client_type
            if session.group and session.group != group:
                self._leave_group(session)
            session.group = group
            session.settings = given
            topics = [entry.topic.name for entry in given.subscription.subscriptions]
            how = ConsumeType.PULL if client_type == ClientType.PULL_CONSUMER else ConsumeType.POP
            self.broker.join_group(group, session.client_id, topics, how)
            return consumer_settings(
                given,
                retry_max_times=config.retry_max_times,
                orderly=config.consume_message_orderly,
                policy=config.retry_policy,
            )
        if client_type in (ClientType.LITE_PUSH_CONSUMER, ClientType.LITE_SIMPLE_CONSUMER):
            raise RequestError(Code.NOT_IMPLEMENTED, "lite consumers are not implemented by mqgate yet")
        raise RequestError(Code.UNRECOGNIZED_CLIENT_TYPE, f"client type {client_type} is not one mqgate knows")

    def _leave_group(self, session: ClientSession) -> None:
        if session.group:
            self.broker.leave_group(session.group, session.client_id)

    # --- transaction check-backs ---------------------------------------------------------------------------------

    def _register_checkers(self, session: ClientSession, topics: set[str]) -> None:
        for topic in list(session.checkers):
            if topic not in topics:
                session.checkers.pop(topic)()
        for topic in topics - session.checkers.keys():
            session.checkers[topic] = self.broker.transactions.register_checker(topic, self._checker(session))

    @staticmethod
    def _unregister_checkers(session: ClientSession) -> None:
        for unregister in session.checkers.values():
            unregister()
        session.checkers.clear()

    @staticmethod
    def _checker(session: ClientSession) -> Callable[[TransactionCheck], Any]:
        def check(question: TransactionCheck) -> None:
            command = TelemetryCommand(
                recover_orphaned_transaction_command=service_pb2.RecoverOrphanedTransactionCommand(
                    message=to_proto(question.message), transaction_id=question.offset_msg_id
                )
            )
            if not session.send(command):
                log.warning(
                    "transaction %s of topic %r: producer %s has no telemetry stream open; checked again later",
                    question.transaction_id,
                    question.message.topic,
                    session.client_id,
                )
            # The answer comes as an EndTransaction (proxy.service).

        return check
