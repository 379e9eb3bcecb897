"""Hypothesis strategies for MQTT packets as `mqtt5` objects: every packet type of MQTT 3.1.1 (what the 3.1.1 codec
can carry: no properties, 3.1.1 subscription options and return codes) and of MQTT 5.0, with their properties."""

from __future__ import annotations

from typing import Any

import mqtt5
from hypothesis import strategies as st

from mqtt_bridge.wire.codec_v311 import SESSION_NEVER_EXPIRES

QoS = mqtt5.QoS


def enum_members(enum: Any) -> list[Any]:
    """mqtt5's enums are pyo3 classes, not iterable: collect their members by name."""
    return [getattr(enum, name) for name in dir(enum) if name.isupper()]


text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12)
topic_names = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00+#"), min_size=1, max_size=20
)
topic_levels = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00+#/"), max_size=5)
topic_filters = st.one_of(
    topic_names,
    st.builds(
        lambda levels, tail: "/".join(levels + tail),
        st.lists(st.one_of(topic_levels, st.just("+")), min_size=1, max_size=4),
        st.sampled_from([[], ["#"]]),
    ),
).filter(bool)
qos_levels = st.integers(0, 2).map(QoS)
packet_ids = st.integers(1, 65_535)
payloads = st.binary(max_size=300)
user_properties = st.lists(st.tuples(text, text), max_size=3)
u32 = st.integers(0, 2**32 - 1)


def accepted_filter(pattern: str) -> bool:
    try:
        mqtt5.TopicFilter(pattern)
    except ValueError:
        return False
    return True


@st.composite
def v311_connects(draw: st.DrawFn) -> mqtt5.ConnectPacket:
    clean = draw(st.booleans())
    username = draw(st.none() | text)
    will = draw(
        st.none()
        | st.builds(
            lambda t, p, q, r: mqtt5.Will(t, payload=p, qos=q, retain=r),
            topic_names,
            payloads,
            qos_levels,
            st.booleans(),
        )
    )
    return mqtt5.ConnectPacket(
        draw(text),
        username=username,
        password=draw(st.none() | st.binary(max_size=20)) if username is not None else None,
        clean_start=clean,
        will=will,
        keep_alive=draw(st.integers(0, 65_535)),
        session_expiry_interval=0 if clean else SESSION_NEVER_EXPIRES,
    )


@st.composite
def v311_publishes(draw: st.DrawFn) -> mqtt5.PublishPacket:
    qos = draw(st.integers(0, 2))
    return mqtt5.PublishPacket(
        draw(topic_names),
        draw(payloads),
        qos=QoS(qos),
        retain=draw(st.booleans()),
        packet_id=draw(packet_ids) if qos else None,
        duplicate=draw(st.booleans()) if qos else False,
    )


def v311_filter(pattern: str, qos: Any) -> mqtt5.TopicFilter:
    return mqtt5.TopicFilter(
        pattern,
        max_qos=qos,
        no_local=False,
        retain_as_published=False,
        retain_handling=mqtt5.RetainHandling.SEND_ALWAYS,
    )


V311_REFUSALS = [
    mqtt5.ConnAckReasonCode.UNSUPPORTED_PROTOCOL_VERSION,
    mqtt5.ConnAckReasonCode.CLIENT_ID_NOT_VALID,
    mqtt5.ConnAckReasonCode.SERVER_UNAVAILABLE,
    mqtt5.ConnAckReasonCode.BAD_USER_NAME_OR_PASSWORD,
    mqtt5.ConnAckReasonCode.NOT_AUTHORIZED,
]
filter_lists = st.lists(topic_filters.filter(accepted_filter), min_size=1, max_size=4)
v311_packets = st.one_of(
    v311_connects(),
    st.builds(lambda present: mqtt5.ConnAckPacket(session_present=present), st.booleans()),
    st.sampled_from(V311_REFUSALS).map(lambda code: mqtt5.ConnAckPacket(reason_code=code)),
    v311_publishes(),
    *(
        st.builds(ack, packet_ids)
        for ack in (mqtt5.PubAckPacket, mqtt5.PubRecPacket, mqtt5.PubRelPacket, mqtt5.PubCompPacket)
    ),
    st.builds(
        lambda pid, patterns, qos: mqtt5.SubscribePacket(
            pid, [v311_filter(p, QoS(q)) for p, q in zip(patterns, qos, strict=False)]
        ),
        packet_ids,
        filter_lists,
        st.lists(st.integers(0, 2), min_size=4, max_size=4),
    ),
    st.builds(
        lambda pid, codes: mqtt5.SubAckPacket(pid, [mqtt5.SubAckReasonCode(code) for code in codes]),
        packet_ids,
        st.lists(st.sampled_from([0, 1, 2, 0x80]), min_size=1, max_size=4),
    ),
    st.builds(mqtt5.UnsubscribePacket, packet_ids, filter_lists),
    st.builds(lambda pid: mqtt5.UnsubAckPacket(pid, []), packet_ids),
    st.builds(mqtt5.PingReqPacket),
    st.builds(mqtt5.PingRespPacket),
    st.builds(mqtt5.DisconnectPacket),
)


@st.composite
def v5_publishes(draw: st.DrawFn) -> mqtt5.PublishPacket:
    qos = draw(st.integers(0, 2))
    alias = draw(st.none() | st.integers(1, 65_535))
    return mqtt5.PublishPacket(
        draw(topic_names | st.just("")) if alias is not None else draw(topic_names),
        draw(payloads),
        qos=QoS(qos),
        retain=draw(st.booleans()),
        packet_id=draw(packet_ids) if qos else None,
        duplicate=draw(st.booleans()) if qos else False,
        payload_format_indicator=draw(st.integers(0, 1)),
        message_expiry_interval=draw(st.none() | u32),
        content_type=draw(st.none() | text),
        response_topic=draw(st.none() | topic_names),
        correlation_data=draw(st.none() | st.binary(max_size=16)),
        subscription_ids=draw(st.lists(st.integers(1, 268_435_455), max_size=2)),
        topic_alias=alias,
        user_properties=draw(user_properties),
    )


@st.composite
def v5_connects(draw: st.DrawFn) -> mqtt5.ConnectPacket:
    will = draw(
        st.none()
        | st.builds(
            lambda t, p, q, r, delay, props: mqtt5.Will(
                t, payload=p, qos=q, retain=r, will_delay_interval=delay, user_properties=props
            ),
            topic_names,
            payloads,
            qos_levels,
            st.booleans(),
            u32,
            user_properties,
        )
    )
    method = draw(st.none() | text)
    return mqtt5.ConnectPacket(
        draw(text),
        username=draw(st.none() | text),
        password=draw(st.none() | st.binary(max_size=20)),
        clean_start=draw(st.booleans()),
        will=will,
        keep_alive=draw(st.integers(0, 65_535)),
        session_expiry_interval=draw(u32),
        authentication_method=method,
        authentication_data=draw(st.none() | st.binary(max_size=8)) if method is not None else None,
        request_problem_info=draw(st.booleans()),
        request_response_info=draw(st.booleans()),
        receive_max=draw(st.integers(1, 65_535)),
        topic_alias_max=draw(st.integers(0, 65_535)),
        max_packet_size=draw(st.none() | st.integers(1, 2**32 - 1)),
        user_properties=draw(user_properties),
    )


@st.composite
def v5_subscribes(draw: st.DrawFn) -> mqtt5.SubscribePacket:
    filters = []
    for pattern in draw(filter_lists):
        filters.append(
            mqtt5.TopicFilter(
                pattern,
                max_qos=draw(qos_levels),
                no_local=draw(st.booleans()) and not pattern.startswith("$share/"),
                retain_as_published=draw(st.booleans()),
                retain_handling=mqtt5.RetainHandling(draw(st.integers(0, 2))),
            )
        )
    subscription_id = draw(st.none() | st.integers(1, 268_435_455))
    return mqtt5.SubscribePacket(draw(packet_ids), filters, subscription_id=subscription_id)


def v5_acks(cls: Any, codes: Any) -> st.SearchStrategy[Any]:
    return st.builds(
        lambda pid, code, reason, props: cls(pid, reason_code=code, reason_str=reason, user_properties=props),
        packet_ids,
        st.sampled_from(enum_members(codes)),
        st.none() | text,
        user_properties,
    )


v5_packets = st.one_of(
    v5_connects(),
    st.builds(
        lambda code, present, assigned, reason: mqtt5.ConnAckPacket(
            session_present=present and code == mqtt5.ConnAckReasonCode.SUCCESS,
            reason_code=code,
            assigned_client_id=assigned,
            reason_str=reason,
        ),
        st.sampled_from(enum_members(mqtt5.ConnAckReasonCode)),
        st.booleans(),
        st.none() | text,
        st.none() | text,
    ),
    v5_publishes(),
    v5_acks(mqtt5.PubAckPacket, mqtt5.PubAckReasonCode),
    v5_acks(mqtt5.PubRecPacket, mqtt5.PubRecReasonCode),
    v5_acks(mqtt5.PubRelPacket, mqtt5.PubRelReasonCode),
    v5_acks(mqtt5.PubCompPacket, mqtt5.PubCompReasonCode),
    v5_subscribes(),
    st.builds(
        lambda pid, codes: mqtt5.SubAckPacket(pid, codes),
        packet_ids,
        st.lists(st.sampled_from(enum_members(mqtt5.SubAckReasonCode)), min_size=1, max_size=4),
    ),
    st.builds(
        lambda pid, patterns, props: mqtt5.UnsubscribePacket(pid, patterns, user_properties=props),
        packet_ids,
        filter_lists,
        user_properties,
    ),
    st.builds(
        lambda pid, codes: mqtt5.UnsubAckPacket(pid, codes),
        packet_ids,
        st.lists(st.sampled_from(enum_members(mqtt5.UnsubAckReasonCode)), min_size=1, max_size=4),
    ),
    st.builds(mqtt5.PingReqPacket),
    st.builds(mqtt5.PingRespPacket),
    st.builds(
        lambda code, expiry, reason: mqtt5.DisconnectPacket(
            reason_code=code, session_expiry_interval=expiry, reason_str=reason
        ),
        st.sampled_from(enum_members(mqtt5.DisconnectReasonCode)),
        st.none() | u32,
        st.none() | text,
    ),
    st.builds(
        lambda code, method, data: mqtt5.AuthPacket(
            reason_code=code, authentication_method=method, authentication_data=data
        ),
        st.sampled_from(enum_members(mqtt5.AuthReasonCode)),
        st.none() | text,
        st.none() | st.binary(max_size=8),
    ),
)
