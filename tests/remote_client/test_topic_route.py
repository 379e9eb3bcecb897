"""A NameServer's route as producers and consumers read it: mqgate's JSON and a Java NameServer's bare-key maps."""

from __future__ import annotations

import pytest

from core import MessageQueue
from remote_client.topic_route import RouteFormatError, parse_route

JAVA = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.7:10911",1:"10.0.0.8:10911"},"brokerName":"b","cluster":"C"},'
    b'{"brokerAddrs":{1:"10.0.0.9:10911"},"brokerName":"c","cluster":"C"},'
    b'{"brokerAddrs":{0:"10.0.0.6:10911"},"brokerName":"a","cluster":"C"}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"b","perm":6,"readQueueNums":2,"topicSysFlag":0,'
    b'"writeQueueNums":2},{"brokerName":"a","perm":4,"readQueueNums":1,"writeQueueNums":1,"topicSysFlag":0},'
    b'{"brokerName":"c","perm":6,"readQueueNums":1,"writeQueueNums":1,"topicSysFlag":0}]}'
)


def test_a_java_nameservers_route_gives_producers_and_consumers_their_queues():
    route = parse_route("t", JAVA)
    assert route.master("b") == "10.0.0.7:10911" and route.master("c") is None
    # a: read-only; c: no master, so no producer writes there; consumers read every readable group.
    assert route.write_queues() == [MessageQueue("t", "b", 0), MessageQueue("t", "b", 1)]
    assert route.read_queues() == [
        MessageQueue("t", "a", 0), MessageQueue("t", "b", 0), MessageQueue("t", "b", 1), MessageQueue("t", "c", 0)
    ]  # fmt: skip
    assert route.addresses() == {"10.0.0.6:10911", "10.0.0.7:10911", "10.0.0.8:10911", "10.0.0.9:10911"}


def test_the_template_lent_to_a_new_topic_has_at_most_the_queues_a_first_send_asks_for():
    template = parse_route("TBW102", b'{"queueDatas":[{"brokerName":"a","perm":7,"readQueueNums":8,'
                                     b'"writeQueueNums":8}],"brokerDatas":[{"brokerName":"a","cluster":"C",'
                                     b'"brokerAddrs":{"0":"h:1"}}]}')  # fmt: skip
    assert template.renamed("fresh", 4).write_queues() == [MessageQueue("fresh", "a", i) for i in range(4)]


@pytest.mark.parametrize("body", [b"", b"[]", b'{"queueDatas":[{"brokerName":"a"}]}', b"\xff"])
def test_a_body_that_is_no_route_is_refused_naming_the_topic(body: bytes):
    with pytest.raises(RouteFormatError, match="topic 't': the route is not a TopicRouteData"):
        parse_route("t", body)
