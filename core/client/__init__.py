"""The in-process client API with the names a RocketMQ user knows: Producer, PullConsumer (and, as they land,
PushConsumer and SimpleConsumer). Front doors and tests use these; nothing here does I/O of its own."""

from core.client.message_codec import ConsumeFromWhere, MessageModel
from core.client.producer import Producer
from core.client.pull_consumer import PullConsumer

__all__ = ["ConsumeFromWhere", "MessageModel", "Producer", "PullConsumer"]
