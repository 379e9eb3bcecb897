"""The settings a client is sent on its Telemetry stream, as the proxy merges them (GrpcClientSettingsManager): the
client's own settings with what the server decides. Pure code.

- Producers: retry 3 attempts with exponential backoff from 10 ms to 1 s, doubling (the proxy's
  grpcClientProducer* defaults); the largest body the endpoint takes; message types are checked against the topic's
  (`validate_message_type`, as the proxy's enableTopicMessageTypeCheck, on).
- Consumers: 32 messages a receive and 20 s of long polling (grpcClientConsumerLongPollingBatchSize,
  grpcClientConsumerMaxLongPollingTimeoutMillis); FIFO when the group consumes orderly (subscriptionGroup.json
  consumeMessageOrderly); `retryMaxTimes + 1` delivery attempts, with the group's retry policy (its groupRetryPolicy,
  by default RocketMQ's customized one: 1 s, 5 s, 10 s, 30 s, 1 min ... 2 h). A push consumer waits that long after
  a failure before the message is delivered again; the broker sends it to the group's dead-letter topic after the
  last attempt.
- Metrics are off: the endpoint collects none.
"""

from __future__ import annotations

from core import GroupRetryPolicy, RetryPolicyType
from proxy.message_codec import to_duration
from proxy.stubs import Settings, definition_pb2

PRODUCER_MAX_ATTEMPTS = 3
PRODUCER_BACKOFF_INITIAL_MS = 10
PRODUCER_BACKOFF_MAX_MS = 1_000
PRODUCER_BACKOFF_MULTIPLIER = 2
CONSUMER_BATCH_SIZE = 32
CONSUMER_LONG_POLLING_MS = 20_000


def producer_settings(given: Settings, max_body_bytes: int) -> Settings:
    settings = Settings()
    settings.CopyFrom(given)
    policy = settings.backoff_policy
    policy.max_attempts = PRODUCER_MAX_ATTEMPTS
    policy.exponential_backoff.CopyFrom(
        definition_pb2.ExponentialBackoff(
            initial=to_duration(PRODUCER_BACKOFF_INITIAL_MS),
            max=to_duration(PRODUCER_BACKOFF_MAX_MS),
            multiplier=PRODUCER_BACKOFF_MULTIPLIER,
        )
    )
    settings.publishing.validate_message_type = True
    settings.publishing.max_body_size = max_body_bytes
    settings.metric.on = False
    return settings


def consumer_settings(given: Settings, *, retry_max_times: int, orderly: bool, policy: GroupRetryPolicy) -> Settings:
    settings = Settings()
    settings.CopyFrom(given)
    subscription = settings.subscription
    subscription.receive_batch_size = CONSUMER_BATCH_SIZE
    subscription.long_polling_timeout.CopyFrom(to_duration(CONSUMER_LONG_POLLING_MS))
    subscription.fifo = orderly
    backoff = settings.backoff_policy
    backoff.max_attempts = retry_max_times + 1
    if policy.type is RetryPolicyType.CUSTOMIZED:
        backoff.customized_backoff.CopyFrom(
            definition_pb2.CustomizedBackoff(next=[to_duration(ms) for ms in policy.next_ms])
        )
    else:
        backoff.exponential_backoff.CopyFrom(
            definition_pb2.ExponentialBackoff(
                initial=to_duration(policy.initial_ms), max=to_duration(policy.max_ms), multiplier=policy.multiplier
            )
        )
    settings.metric.on = False
    return settings
