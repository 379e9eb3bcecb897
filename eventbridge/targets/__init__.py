"""Delivering matched events to targets, each target a sink task of the connector runtime.

target_task.py       one target's task: the events routed to it, transformed, delivered, retried, dead-lettered
transform.py         what a target receives as the CloudEvent's data (input path, input template)
http_target.py       an HTTP target: a CloudEvent over HTTP (binary or structured), one shared aiohttp client
headers.py           the extra headers an HTTP target sends (static, from the event, auth)
local_targets.py     targets inside mqgate: a core topic, an MQTT topic (topic_template.py), another bus
delivery_outcome.py  DeliveryOutcome: what every deliverer (HTTP or local) answers for one attempt
retry_policy.py, deadlines.py, clock.py   when to try again and when to give up; timeouts without a timer
                     per request; the clock retries run on
dead_letters.py      the events a target gave up on: listed, and redriven once the target is fixed

An event read from a target's delivery queue is decoded once, by target_task.py, and that one dict (the form of
eventbridge/event_form.py) is what the rest is given: local_targets.py's Deliverers -> http_target.py (transform.py,
headers.py; the CloudEvent encoded once, as the request body) or the local targets (encoded once, as their
message); the DeliveryOutcome goes back to target_task.py, which retries (retry_policy.py) or sends the stored
body, as it is, to the dead-letter topic.
"""
