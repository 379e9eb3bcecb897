"""PULL_MESSAGE 11 on the core, with long polling (RocketMQ's PullMessageProcessor and PullRequestHoldService).

A pull with the suspend flag that finds nothing waits up to its suspendTimeoutMillis (at most the broker's
max_long_poll_ms) for a message to arrive, inside its own task: the connection's other requests go on. Answers:

    messages found                         SUCCESS, the stored records as the body
    none (after the wait)                  PULL_NOT_FOUND 19
    only messages the filter passes over   PULL_RETRY_IMMEDIATELY 20 (NO_MATCHED_MSG), nextBeginOffset past them
    an offset before the queue's first,    PULL_OFFSET_MOVED 21, nextBeginOffset where to go on
      or past its end

The reply names nextBeginOffset, minOffset, maxOffset and suggestWhichBrokerId, as strings. Reading from a slave
(RocketMQ's slaveReadEnable, [broker] slave_read_enable): a master suggests broker 1 (RocketMQ's
whichBrokerWhenConsumeSlowly) to a reader whose last message lies further behind the log's end than [store]
access_message_in_memory_max_ratio of memory, else 0, itself. A slave whose master lives serves only such reads, and
answers any other PULL_RETRY_IMMEDIATELY with suggestWhichBrokerId 0 and no message (RocketMQ 5 serves what it
found and then redirects; refusing keeps every read that the master should serve on the master); with
slave_read_enable off it serves none while its master lives (RocketMQ rejects them all, even with its master down).
A slave whose master is down serves every read: consumers go on from the copy. A slave ignores the commit flag, as
RocketMQ's (clients clear it towards slaves): offsets reach it by UPDATE_CONSUMER_OFFSET.

The commit-offset flag commits the request's commitOffset once, before the pull waits (a clustering consumer's
progress, carried on its pulls). The filter is the request's subscription when its subscription flag is set, else
the one its group registered by heartbeat for the topic, else every message; each expression is compiled once
(core.build_filter) and kept while it is the same.
"""

from __future__ import annotations

from collections.abc import Callable

from broker_remoting.records import records_body
from core import Broker, BrokerRole, MessageFilter, PullStatus, build_filter
from remoting.channel import Channel
from remoting.codes import ResponseCode
from remoting.command import RemotingCommand
from remoting.message_codec import Host
from remoting.request_headers import PULL_SUBSCRIPTION, PullHeader, pull_header, pull_reply_fields

# RocketMQ's MixAll.MASTER_ID, and the subscription group's whichBrokerWhenConsumeSlowly (1 by default).
MASTER_ID = 0
SLOW_READER_BROKER_ID = 1
# Compiled filters kept, by (expression type, expression): consumers of one group share theirs.
MAX_KEPT_FILTERS = 4096

# The subscription a group registered for a topic, as (expression type, expression); None: none registered.
SubscriptionOf = Callable[[str, str], tuple[str, str] | None]


class PullService:
    def __init__(self, broker: Broker, store_host: Callable[[], Host], subscription_of: SubscriptionOf) -> None:
        self._broker = broker
        self._store_host = store_host
        self._subscription_of = subscription_of
        self._filters: dict[tuple[str, str], MessageFilter | None] = {}

    async def pull(self, channel: Channel, request: RemotingCommand) -> RemotingCommand:
        header = pull_header(request)
        broker = self._broker
        slave = broker.ha.role is BrokerRole.SLAVE
        read_slave = broker.config.slave_read_enable
        if (
            slave
            and broker.ha.master_alive()
            and not (read_slave and broker.ha.far_behind(header.topic, header.queue_id, header.queue_offset))
        ):
            fields = pull_reply_fields(header.queue_offset, 0, 0, MASTER_ID)
            return request.reply(
                ResponseCode.PULL_RETRY_IMMEDIATELY,
                "this slave's master lives and serves this read: pull from the master (suggestWhichBrokerId 0)",
                ext_fields=fields,
            )
        if header.commits_offset and header.commit_offset >= 0 and not slave:
            broker.commit_offset(header.consumer_group, header.topic, header.queue_id, header.commit_offset)
        message_filter = self._filter(header)
        result = await broker.pull(
            header.consumer_group,
            header.topic,
            header.queue_id,
            header.queue_offset,
            max_count=max(1, header.max_msg_nums),
            message_filter=message_filter,
            long_poll_ms=header.suspend_timeout_ms if header.suspends else 0,
        )
        if result.status is PullStatus.FOUND:
            suggest = SLOW_READER_BROKER_ID if read_slave and broker.ha.record_far_behind(result.messages[-1]) else 0
            fields = pull_reply_fields(result.next_begin_offset, result.min_offset, result.max_offset, suggest)
            return request.reply(
                ResponseCode.SUCCESS, ext_fields=fields, body=records_body(result.messages, self._store_host())
            )
        if result.status is PullStatus.OFFSET_ILLEGAL or header.queue_offset > result.max_offset:
            next_offset = result.min_offset if header.queue_offset < result.min_offset else result.max_offset
            fields = pull_reply_fields(next_offset, result.min_offset, result.max_offset)
            return request.reply(
                ResponseCode.PULL_OFFSET_MOVED,
                f"offset {header.queue_offset} is outside queue {header.topic}:{header.queue_id}"
                f" [{result.min_offset}, {result.max_offset}]",
                ext_fields=fields,
            )
        fields = pull_reply_fields(result.next_begin_offset, result.min_offset, result.max_offset)
        if result.status is PullStatus.NO_MATCHED_MSG:
            return request.reply(ResponseCode.PULL_RETRY_IMMEDIATELY, "no matched message", ext_fields=fields)
        return request.reply(ResponseCode.PULL_NOT_FOUND, "no new message", ext_fields=fields)

    def _filter(self, header: PullHeader) -> MessageFilter | None:
        if header.sys_flag & PULL_SUBSCRIPTION and header.subscription is not None:
            subscription: tuple[str, str] | None = (header.expression_type, header.subscription)
        else:
            subscription = self._subscription_of(header.consumer_group, header.topic)
        if subscription is None:
            return None
        if subscription in self._filters:
            return self._filters[subscription]
        expression_type, expression = subscription
        every = expression_type.upper() == "TAG" and expression.strip() in ("", "*")
        compiled = None if every else build_filter(expression_type, expression)
        if len(self._filters) >= MAX_KEPT_FILTERS:
            self._filters.clear()
        self._filters[subscription] = compiled
        return compiled
