"""Where a consumer's offsets live and where it starts (RocketMQ's OffsetStore and ConsumeFromWhere).

Clustering groups keep their offsets in the broker, which persists them; broadcasting consumers keep theirs
here, each its own, as RocketMQ's LocalFileOffsetStore does on the client.
"""

from __future__ import annotations

from core.broker import Broker
from core.client.message_codec import ConsumeFromWhere, MessageModel
from core.message_queue import MessageQueue


class OffsetStore:
    def __init__(
        self,
        broker: Broker,
        group: str,
        message_model: MessageModel,
        consume_from: ConsumeFromWhere,
        consume_timestamp_ms: int | None,
    ) -> None:
        self.broker = broker
        self.group = group
        self.message_model = message_model
        self.consume_from = consume_from
        self.consume_timestamp_ms = consume_timestamp_ms
        self._local: dict[MessageQueue, int] = {}

    def committed(self, queue: MessageQueue) -> int:
        """The committed offset of the queue, or -1 if there is none."""
        if self.message_model is MessageModel.BROADCASTING:
            return self._local.get(queue, -1)
        return self.broker.query_offset(self.group, queue.topic, queue.queue_id)

    def commit(self, queue: MessageQueue, offset: int) -> None:
        if self.message_model is MessageModel.BROADCASTING:
            self._local[queue] = offset
        else:
            self.broker.commit_offset(self.group, queue.topic, queue.queue_id, offset)

    def start_offset(self, queue: MessageQueue) -> int:
        """Where to read from: the committed offset, else where ConsumeFromWhere says (TIMESTAMP without a time
        starts at the last offset)."""
        committed = self.committed(queue)
        if committed >= 0:
            return committed
        if self.consume_from is ConsumeFromWhere.FIRST_OFFSET:
            return self.broker.min_offset(queue.topic, queue.queue_id)
        if self.consume_from is ConsumeFromWhere.TIMESTAMP and self.consume_timestamp_ms is not None:
            return self.broker.search_offset(queue.topic, queue.queue_id, self.consume_timestamp_ms)
        return self.broker.max_offset(queue.topic, queue.queue_id)
