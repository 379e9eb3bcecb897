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
    cluster.py                     on a cluster: the rules directory shared, each target's node among the live groups
    source_task.py                 event sources: core topics (or MQTT topic filters) turned into events
    rest.py, replay_rest.py        the HTTP API (rules, buses, sources; replays and dead letters)
    json_path.py, time_range.py    JSONPath over an event; the times the replay API takes
    errors.py                      EventBridgeError and its kinds
    patterns/    the pattern language, compiled once into one machine per bus (matcher.py)
    rules/       rule files: read with every node's position, validated, loaded per directory
    targets/     delivery to each kind of target, transforms, retry policies, dead letters
    archives/    archives (segment files filled from a bus) and replays
    schedules/   scheduled rules: rate() and cron() expressions, and their timers

A PutEvents event to an HTTP target, module by module. It is decoded once per hop at most, and encoded once for the
store and once for the target:

    ingress   rest.py -> ingress.py -> ingress_event.py (the request decoded, once; the CloudEvent checked) ->
              event_form.py (its structured form, built once) -> event_schema.py -> bus.py (encoded for the store)
    router    inside bus.py's send, the core's send hook: router.py (the event as put, with its message: not
              decoded) -> patterns/matcher.py; stored once, with an entry in each matching target's delivery queue
    target    runtime.py's sink runner of the target -> targets/target_task.py (decoded from the queue, once) ->
              targets/local_targets.py (Deliverers) -> targets/http_target.py (targets/transform.py, headers.py; the
              CloudEvent encoded as the POST's body) -> targets/delivery_outcome.py; on failure retry_policy.py,
              then target_task.py's dead letter (the stored body as it is)
"""
