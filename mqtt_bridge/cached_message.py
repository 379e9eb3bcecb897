"""A message on its way to subscribers: the decoded `MqttMessage`, the core topic it is counted under, and its QoS 0
PUBLISH bytes, encoded once for all its receivers (the message cache keeps one per recent message).

It keeps the message's QoS 0 PUBLISH bytes, per protocol level and retain flag: every receiver of a
message at QoS 0 gets the same bytes, encoded once, but for MQTT 5 receivers of a message with subscription
identifiers or a Message Expiry (its remaining interval is written at sending time). MQTT 3.1.1 PUBLISHes,
which carry no properties, are encoded from the message's fields without a packet object. The bytes kept carry
the full topic name and no Topic Alias: an MQTT 5 connection that takes topic aliases from the server queues a
copy with its own (`MqttConnection.publish_cached`), and the others send the shared bytes as they are.

`MqttConnection.publish_cached` (protocol.py) chooses and fills the encodings: the protocol object owns the wire.
"""

from __future__ import annotations

from dataclasses import dataclass

from mqtt_bridge.message_mapping import MqttMessage


@dataclass(slots=True, init=False)
class CachedMessage:
    """A decoded message and its QoS 0 PUBLISH encodings. Its __init__ is written out: mypyc compiles a class's own
    methods, while those the dataclass decorator generates run interpreted (core.store.put_result.PutResult)."""

    message: MqttMessage
    size: int
    topic: str  # the core topic that stores it: deliveries are counted under it (core.TopicTraffic)
    # The QoS 0 MQTT 3.1.1 PUBLISH without retain flag, what most receivers get (for a message a 3.1.1 client
    # published so, the bytes it sent: put_many), in a field of its own: as a dict entry it cost 0.4 us of the
    # 1.3 us a put_many entry took (allocating, tracking by the GC and freeing a dict per message; 64-byte
    # messages, a full cache).
    v311: bytes | None
    # The other QoS 0 encodings, by (protocol level, retain flag); made on the first: the empty dict for every
    # stored message cost more than the lookups it saves.
    qos0: dict[tuple[int, bool], bytes] | None

    def __init__(self, message: MqttMessage, size: int, topic: str, v311: bytes | None = None) -> None:
        self.message = message
        self.size = size
        self.topic = topic
        self.v311 = v311
        self.qos0 = None
