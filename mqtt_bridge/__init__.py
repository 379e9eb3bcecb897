"""The MQTT gateway: MQTT 3.1.1 and 5.0 clients publish and subscribe on the broker core.

Design (decided for issue 4):

- Codecs. `amqtt` speaks only protocol level 4 and acknowledges a PUBLISH before any plugin could store it, so
  its broker is not used: our own session layer runs on codecs. Level 5 is decoded and encoded by `mqtt5` (a
  sans-IO MQTT 5 codec in Rust); level 4 by amqtt's packet classes, driven synchronously on a buffer, with a
  struct fast path for PUBLISH and the acknowledgements (codec_v311.py). Both hand the session layer `mqtt5`
  packet objects, so every rule is written once. framing.py cuts the byte stream into packets and refuses an
  oversize one before buffering it.
- Sans-IO. protocol.py (`MqttConnection`) turns bytes into events and the gateway's answers into bytes: no
  socket, no clock. session_rules.py (`SessionRules`) holds the session rules (takeover, clean start, expiry, wills,
  QoS 2 duplicates) as events in and actions out; session.py what outlives a connection and delivery planning.
  listener.py is the thin network side (TCP, TLS, WebSocket at `/mqtt`); gateway.py and its parts (inbound.py,
  subscriptions.py, delivery.py) carry the rules out against the core, through its public API only.
- Mapping (topic_mapping.py). Total: every valid MQTT topic is stored. The first level chooses the core topic: itself
  when it is a plain name ([A-Za-z0-9_-], 127 characters at most, not one the core uses), else `%MQTT%` and a
  reversible escape of its UTF-8 bytes ('/TopicA' -> '%MQTT%', 'dev.1/t' -> '%MQTT%dev_2E1'). The full topic and
  the MQTT attributes travel as message properties, or as a JSON header at the start of the body when the properties
  cannot hold them (message_mapping.py), so core producers and consumers see the same messages.
- Refusals (publish_refusal.py). Nothing refused is acknowledged as stored: MQTT 5 gets the reason code, 3.1.1 a
  closed connection (ACL denials: acknowledged and dropped, as Mosquitto).
- Light queues. Every subscription filter has a light queue in the core (RocketMQ's LMQ). A send hook matches a
  message's MQTT topic against the subscription trie and names the matching filters' queues: one commit-log
  record, one 20-byte consume-queue entry per matching filter, however many sessions share the filter.
- Durability. A QoS 1/2 PUBLISH is acknowledged after `Broker.send` returns: stored, and on disk under
  SYNC_FLUSH. Persistent sessions, their positions and retained messages are kept in the core
  (core/tables/state_table.py:
  changes are core messages, with a snapshot), and come back after a restart.

Not yet (see docs/mqtt.md): outbound delivery is at least once across a broker crash (a session's positions are
written every few seconds); the delivery loop and shared-subscription hand-out live in delivery.py, with their
planning (what to send, at which QoS) pure in session.py and shared_group.py, but not yet as session-rule events.
"""
