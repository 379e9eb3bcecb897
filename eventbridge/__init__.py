"""EventBridge in mqgate: event buses on core topics, rules written in YAML that match events with AWS EventBridge's
pattern language, and targets that receive what they match (HTTP endpoints as CloudEvents, core topics, MQTT
topics, other buses), with retries, dead letters, archives and replays.

    ingress.py, ingress_event.py   PutEvents over HTTP (POST /buses/{bus}/events): CloudEvents read and checked
    event_form.py                  the one form an event takes past ingress (CloudEvents structured JSON, a dict);
                                   canonical_json, by which rules compare JSON values
    event_schema.py                the event center's JSON Schemas an event must satisfy to enter a bus
    bus.py                         a bus is a core topic: how an event is written as a message and read back
    router.py                      at put time, each event matched once against every rule of its bus
    runtime.py                     the buses, the watched rule directory, one connector sink task per target
    source_task.py                 event sources: core topics (or MQTT topic filters) turned into events
    rest.py, replay_rest.py        the HTTP API (rules, buses, sources; replays and dead letters)
    json_path.py, time_range.py    JSONPath over an event; the times the replay API takes
    errors.py                      EventBridgeError and its kinds
    patterns/    the pattern language, compiled once into one machine per bus (matcher.py)
    rules/       rule files: read with every node's position, validated, loaded per directory
    targets/     delivery to each kind of target, transforms, retry policies, dead letters
    archives/    archives (segment files filled from a bus) and replays
    schedules/   scheduled rules: rate() and cron() expressions, and their timers

A PutEvents event: ingress.py -> event_schema.py -> bus.py (stored in the bus's core topic, with the rules it
matched: router.py -> patterns/matcher.py) -> runtime.py's sink task of each matching target -> targets/target_task.py
-> targets/transform.py -> targets/http_target.py (a CloudEvent POSTed) or targets/local_targets.py.
"""
