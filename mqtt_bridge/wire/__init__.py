"""MQTT on the wire, without I/O (as h11): bytes in, events out; the gateway's answers in, bytes out.

framing.py cuts the byte stream into packets (an oversize one is refused before it is buffered); codec.py reads the
fixed header and the protocol level; codec_v311.py (amqtt's packet classes, with a struct fast path for PUBLISH and
the acknowledgements) and codec_v5.py (mqtt5) decode and encode, both into `mqtt5` packet objects;
protocol.py (`MqttConnection`) holds one connection's protocol state (packet ids, flow control, topic aliases) and
turns packets into the events of protocol_events.py, which holds as well what the gateway hands it to send (a
`CachedMessage`: a message with the QoS 0 PUBLISH bytes its receivers share, which `publish_cached` fills).
"""
