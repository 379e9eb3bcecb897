"""The settings a client is sent on its Telemetry stream, as the proxy merges them (GrpcClientSettingsManager): the
client's own settings with what the server decides. Pure code.

- Producers: retry 3 attempts with exponential backoff from 10 ms to 1 s, doubling (the proxy's
  grpcClientProducer* defaults); the largest body the endpoint takes; message types are checked against the topic's
  (`validate_message_type`, as the proxy's enableTopicMessageTypeCheck, on).
- Consumers: 32 messages a receive and 20 s of long polling (grpcClientConsumerLongPollingBatchSize,
  grpcClientConsumerMaxLongPollingTimeoutMillis); FIFO when the group consumes orderly (subscriptionGroup.json
  consumeMessageOrderly); `retryMaxTimes + 1` delivery attempts, with the customized backoff RocketMQ's groups have
  by default (CustomizedRetryPolicy: 1 s, 5 s, 10 s, 30 s, 1 min ... 2 h). A push consumer waits that long after a
  failure before the message is delivered again; the broker sends it to the group's dead-letter topic after the
  last attempt.
- Metrics are off: the endpoint collects none.
"""

from __future__ import annotations

from rocketmq.grpc_protocol import Settings, definition_pb2

from core.grpc.message_codec import to_duration

PRODUCER_MAX_ATTEMPTS = 3
PRODUCER_BACKOFF_INITIAL_MS = 10
PRODUCER_BACKOFF_MAX_MS = 1_000
PRODUCER_BACKOFF_MULTIPLIER = 2
CONSUMER_BATCH_SIZE = 32
CONSUMER_LONG_POLLING_MS = 20_000
# RocketMQ's CustomizedRetryPolicy.next, in milliseconds.
DEFAULT_RETRY_BACKOFF_MS = (
    1_000, 5_000, 10_000, 30_000,
    60_000, 120_000, 180_000, 240_000, 300_000, 360_000, 420_000, 480_000, 540_000, 600_000,
    1_200_000, 1_800_000, 3_600_000, 7_200_000,
)  # fmt: skip


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


def consumer_settings(
    given: Settings, *, retry_max_times: int, orderly: bool, backoff_ms: tuple[int, ...] = DEFAULT_RETRY_BACKOFF_MS
) -> Settings:
    settings = Settings()
    settings.CopyFrom(given)
    subscription = settings.subscription
    subscription.receive_batch_size = CONSUMER_BATCH_SIZE
    subscription.long_polling_timeout.CopyFrom(to_duration(CONSUMER_LONG_POLLING_MS))
    subscription.fifo = orderly
    policy = settings.backoff_policy
    policy.max_attempts = retry_max_times + 1
    policy.customized_backoff.CopyFrom(definition_pb2.CustomizedBackoff(next=[to_duration(ms) for ms in backoff_ms]))
    settings.metric.on = False
    return settings
