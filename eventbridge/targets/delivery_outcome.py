"""What every deliverer answers for one attempt to deliver one event (HTTP: http_target.py; core topic, MQTT topic,
bus: local_targets.py): the result target_task.py's retry policy and dead letters act on."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class DeliveryOutcome:
    """The result of one delivery attempt: what the retry policy and the dead-letter queue need to know."""

    ok: bool
    status: int | None  # the HTTP status; None when there was no response (refused, timeout, render error)
    error: str  # "" when ok; else a one-line reason naming what happened
    retryable: bool  # False for a render error and for 4xx other than 408/429
