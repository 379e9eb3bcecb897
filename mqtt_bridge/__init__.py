"""The MQTT gateway: MQTT 3.1.1 and 5.0 clients publish and subscribe on the broker core, through its public API only.

The package:
- listener.py: the network side (TCP, TLS, WebSocket at `/mqtt`), transport and back-pressure only; it hands each
  connection's events to the gateway (`MqttGateway.handle`) and writes what the protocol object queued.
- gateway.py: the coordinator. It builds the parts below, carries out the session rules' actions, and holds the
  core's hooks. The parts each own their state: inbound.py (PUBLISH to the core, batched, acknowledged once
  stored or refused as publish_refusal.py says; QoS 2 records), subscriptions.py (SUBSCRIBE/UNSUBSCRIBE, the trie,
  a light queue per filter), shared_subscriptions.py (with shared_group.py, the groups' hand-out, pure),
  retained.py, delivery.py (per-link loops; delivery_round.py the compiled per-message work), message_cache.py (the
  one read path: recent messages decoded, the rest through `Broker.pull`), counters.py. message_mapping.py maps an
  MQTT message to a core message and back; link.py is what the gateway needs of a connection.
- wire/: framing, the 3.1.1 and 5.0 codecs and the sans-IO protocol object (`MqttConnection`: bytes in, events
  out; answers in, bytes out); sessions/: session.py, session_rules.py (events in, actions out, no I/O), the
  session table and the records the core keeps; topics/: names and filters, the trie, the mapping to core topics;
  access/: the password and ACL files; sys_topics/: the `$SYS` tree; cluster/: on a cluster of broker groups, the
  filter registry every group's send hook routes by and the other groups' light queues (docs/cluster.md).
  The gateway's parts stay at the top on purpose: they are the package's subject, and a reader starts there.

One QoS 1 PUBLISH, publisher to subscriber (the 16 modules of this package it crosses, in order):
listener -> wire/protocol (wire/framing, wire/codec_v5, wire/codec, wire/protocol_events: a `Published` event) ->
gateway.handle -> inbound (a `TopicRoute` per run of one topic: topics/topic, message_mapping) -> core
`Broker.send_batch`, whose send hook (gateway) names the light queues of the matching filters (topics/topic_trie)
-> PUBACK once stored -> core arrival listener -> subscriptions.arrived wakes the subscriber's link ->
delivery (message_cache, sessions/session) -> delivery_round -> wire/protocol.publish_cached -> listener writes.

Design decisions (issue 4): `amqtt` speaks only protocol level 4 and acknowledges a PUBLISH before any plugin could
store it, so its broker is not used: our own session layer runs on codecs (amqtt's packet classes for level 4,
`mqtt5`, a Rust codec, for level 5), both handing the session layer `mqtt5` packet objects, so every rule is written
once.
- Mapping (topics/topic_mapping.py). Total: every valid MQTT topic is stored. The first level chooses the core
  topic: itself when it is a plain name ([A-Za-z0-9_-], 127 characters at most, not one the core uses), else
  `%MQTT%` and a reversible escape of its UTF-8 bytes ('/TopicA' -> '%MQTT%', 'dev.1/t' -> '%MQTT%dev_2E1'). The
  full topic and the MQTT attributes travel as message properties, or as a JSON header at the start of the body
  when the properties cannot hold them (message_mapping.py), so core producers and consumers see the same messages.
- Refusals (publish_refusal.py). Nothing refused is acknowledged as stored: MQTT 5 gets the reason code, 3.1.1 a
  closed connection (ACL denials: acknowledged and dropped, as Mosquitto).
- Light queues. Every subscription filter has a light queue in the core (RocketMQ's LMQ). A send hook matches a
  message's MQTT topic against the subscription trie and names the matching filters' queues: one commit-log
  record, one 20-byte consume-queue entry per matching filter, however many sessions share the filter.
- Durability. A QoS 1/2 PUBLISH is acknowledged after `Broker.send` returns: stored, and on disk under
  SYNC_FLUSH. Persistent sessions, their positions and retained messages are kept in the core
  (core/tables/state_table.py: changes are core messages, with a snapshot), and come back after a restart.

Not yet (see docs/mqtt.md): outbound delivery is at least once across a broker crash (a session's positions are
written every few seconds); the delivery loop plans with pure code (sessions/session.py, shared_group.py,
delivery_round.py) but is not driven by session-rule events.
"""
