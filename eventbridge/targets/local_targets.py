"""Targets inside mqgate: a core topic, an MQTT topic, another bus. Each delivers one matched event and says how it
went as a DeliveryOutcome, as the HTTP target does, so the same retry policy and dead letters apply (target_task).

What each receives:

- **Core topic** (TopicTarget): one message per event, in CloudEvents' Kafka protocol binding, which maps onto a
  core message as it does onto a Kafka record. Binary mode: the transformed data is the body, every attribute is
  a property `ce_<name>` and the data's content type is `content-type`. Structured mode: the body is the whole
  CloudEvent in JSON, `content-type` is `application/cloudevents+json`. The message is keyed by the event id
  (a query by key finds it) and tagged with the target's `tag`, or else the event's type.
- **MQTT topic** (MqttTarget): the gateway stores it as a client's PUBLISH (`publish_from_server`), so subscribers
  get it at up to the target's QoS and `retain` keeps it as the topic's retained message. CloudEvents' MQTT
  binding: in binary mode the data is the payload, the content type is MQTT 5's Content Type and each other
  attribute a User Property named as the attribute (MQTT 3.1.1 subscribers get the payload alone); in structured
  mode the payload is the whole CloudEvent in JSON. The topic may take values of the event
  (`devices/${$.data.device}/cmd`, topic_template.py).
- **Another bus** (BusTarget): the event as it is (same id, same time), where that bus's rules route it.

Failures: a transform or topic template that cannot render the event, and anything the core or the gateway refuse
for what the message is (no such topic or bus, a topic the MQTT configuration does not take, too large: the
ValueError and LookupError family, and a refused permission) fail for good, so the event is dead-lettered at once;
whatever may pass (a disk refusing writes, a flush not confirmed in time) is retryable under the target's policy.
The targets store in order, one event at a time (concurrency 1): a local store takes microseconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from cloudevents.core.bindings import kafka

from core import Broker, NoPermissionError, Producer, SendStatus
from eventbridge.bus import EventBuses
from eventbridge.errors import TransformRenderError
from eventbridge.rules.model import BusTarget, HttpTarget, MqttTarget, Target, TargetMode, TopicTarget
from eventbridge.targets.delivery_outcome import DeliveryOutcome
from eventbridge.targets.http_target import DATA_FORMAT, cloud_event_of
from eventbridge.targets.topic_template import render_topic

_CONTENT_TYPE = kafka.CONTENT_TYPE_HEADER
_ATTRIBUTE_PREFIX = kafka.CE_PREFIX
_DELIVERED = DeliveryOutcome(ok=True, status=None, error="", retryable=False)


class MqttPublisher(Protocol):
    """What publishes an MQTT target's messages: the MQTT gateway (mqtt_bridge's `publish_from_server`)."""

    async def publish_from_server(
        self,
        topic: str,
        payload: bytes,
        qos: int,
        retain: bool,
        content_type: str | None = None,
        user_properties: list[tuple[str, str]] | None = None,
    ) -> None: ...


class HttpDeliverer(Protocol):
    """What delivers to HTTP targets (http_target.HttpTargetClient)."""

    async def deliver(self, target: HttpTarget, event: Mapping[str, Any]) -> DeliveryOutcome: ...


class Deliverers:
    """Each target's events to the deliverer of its kind: HTTP targets to `http`, the others to `local`."""

    def __init__(self, http: HttpDeliverer, local: LocalTargets) -> None:
        self.http = http
        self.local = local

    async def deliver(self, target: Target, event: Mapping[str, Any]) -> DeliveryOutcome:
        if isinstance(target, HttpTarget):
            return await self.http.deliver(target, event)
        return await self.local.deliver(target, event)


class LocalTargets:
    def __init__(self, broker: Broker, buses: EventBuses, mqtt: MqttPublisher | None = None) -> None:
        self.broker = broker
        self.buses = buses
        self.mqtt = mqtt
        self.producer = Producer(broker, "eventbridge-targets")

    async def deliver(self, target: TopicTarget | MqttTarget | BusTarget, event: Mapping[str, Any]) -> DeliveryOutcome:
        try:
            if isinstance(target, TopicTarget):
                return await self._to_topic(target, event)
            if isinstance(target, MqttTarget):
                return await self._to_mqtt(target, event)
            return await self._to_bus(target, event)
        except (TransformRenderError, ValueError, LookupError, NoPermissionError) as exc:
            return _failed(exc, retryable=False)
        except Exception as exc:  # the store or the gateway could not take it now: the retry policy decides
            return _failed(exc, retryable=True)

    async def _to_topic(self, target: TopicTarget, event: Mapping[str, Any]) -> DeliveryOutcome:
        message = _bound(target, event)
        properties = {name: value.decode("utf-8") for name, value in message.headers.items()}
        tag = target.tag if target.tag is not None else str(event.get("type") or "") or None
        result = await self.producer.send(
            target.topic, message.value, keys=[str(event["id"])], tags=tag, properties=properties
        )
        return _stored(result.status)

    async def _to_mqtt(self, target: MqttTarget, event: Mapping[str, Any]) -> DeliveryOutcome:
        if self.mqtt is None:
            return DeliveryOutcome(
                ok=False, status=None, error="the MQTT gateway is not running ([mqtt] enabled = false)", retryable=False
            )
        topic = render_topic(target.topic, event)
        message = _bound(target, event)
        content_type = message.headers.get(_CONTENT_TYPE)
        user_properties = [
            (name[len(_ATTRIBUTE_PREFIX) :], value.decode("utf-8"))
            for name, value in message.headers.items()
            if name.startswith(_ATTRIBUTE_PREFIX)
        ]
        await self.mqtt.publish_from_server(
            topic,
            message.value,
            target.qos,
            target.retain,
            content_type.decode("utf-8") if content_type is not None else None,
            user_properties,
        )
        return _DELIVERED

    async def _to_bus(self, target: BusTarget, event: Mapping[str, Any]) -> DeliveryOutcome:
        if not self.buses.exists(target.bus):
            return DeliveryOutcome(ok=False, status=None, error=f"bus {target.bus!r} does not exist", retryable=False)
        await self.buses.put(target.bus, [event])
        return _DELIVERED


def _bound(target: TopicTarget | MqttTarget, event: Mapping[str, Any]) -> kafka.KafkaMessage:
    """The target's CloudEvent for `event` in the Kafka binding, in the target's mode (raises TransformRenderError)."""
    binary = target.mode is TargetMode.BINARY
    cloud_event = cloud_event_of(target.transform, event, canonical_extensions=binary)
    return (kafka.to_binary if binary else kafka.to_structured)(cloud_event, DATA_FORMAT)


def _stored(status: SendStatus) -> DeliveryOutcome:
    if status is SendStatus.SEND_OK:
        return _DELIVERED
    return DeliveryOutcome(ok=False, status=None, error=f"stored, not confirmed durable: {status.name}", retryable=True)


def _failed(exc: BaseException, retryable: bool) -> DeliveryOutcome:
    detail = " ".join(str(exc).split()) or "no detail"
    return DeliveryOutcome(ok=False, status=None, error=f"{type(exc).__name__}: {detail}", retryable=retryable)
