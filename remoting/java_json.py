"""JSON as RocketMQ's Java side writes it (fastjson), for the bodies whose maps are keyed by objects: a
TopicStatsTable's, ConsumeStats's and ResetOffsetBody's `offsetTable` maps a MessageQueue to its figures, written
`{{"brokerName":"b","queueId":0,"topic":"t"}:{...}}`, which is not JSON but is what mqadmin and the Java client read.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def queue_key(topic: str, broker_name: str, queue_id: int) -> str:
    """A MessageQueue as fastjson writes it as a map key: its fields in name order."""
    return json.dumps({"brokerName": broker_name, "queueId": queue_id, "topic": topic}, separators=(",", ":"))


def object_keyed(entries: Iterable[tuple[str, Any]]) -> str:
    """A map whose keys are already-written JSON objects (queue_key), with JSON values."""
    return "{" + ",".join(f"{key}:{json.dumps(value, separators=(',', ':'))}" for key, value in entries) + "}"


def body_with(fields: dict[str, Any], **object_keyed_maps: str) -> bytes:
    """A JSON object of `fields`, plus members whose values are object-keyed maps written by `object_keyed`."""
    members = [f"{json.dumps(name)}:{json.dumps(value, separators=(',', ':'))}" for name, value in fields.items()]
    members += [f"{json.dumps(name)}:{text}" for name, text in object_keyed_maps.items()]
    return ("{" + ",".join(members) + "}").encode()
