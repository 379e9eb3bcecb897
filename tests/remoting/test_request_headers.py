"""Request headers a broker reads (remoting/request_headers.py): SEND_MESSAGE's named fields and SEND_MESSAGE_V2's
letters give the same header, defaults where RocketMQ allows a field to be missing, a missing required field or a
bad number named in the error, Java's boolean parsing, the pull flags, and reply fields written as strings."""

from __future__ import annotations

import pytest

from remoting.codes import RequestCode
from remoting.command import RemotingCommand
from remoting.request_headers import (
    HeaderFieldError,
    PullHeader,
    pull_header,
    pull_reply_fields,
    send_header,
    send_reply_fields,
)

V1 = {
    "producerGroup": "pg", "topic": "orders", "defaultTopic": "TBW102", "defaultTopicQueueNums": "4",
    "queueId": "2", "sysFlag": "0", "bornTimestamp": "1700000000000", "flag": "0",
    "properties": "KEYS\x01k1\x02TAGS\x01t\x02", "reconsumeTimes": "0", "unitMode": "false",
    "maxReconsumeTimes": "16", "batch": "false",
}  # fmt: skip
LETTERS = {"producerGroup": "a", "topic": "b", "defaultTopic": "c", "defaultTopicQueueNums": "d", "queueId": "e",
           "sysFlag": "f", "bornTimestamp": "g", "flag": "h", "properties": "i", "reconsumeTimes": "j",
           "unitMode": "k", "maxReconsumeTimes": "l", "batch": "m"}  # fmt: skip


def test_v1_names_and_v2_letters_give_the_same_header():
    v1 = send_header(RemotingCommand(RequestCode.SEND_MESSAGE, ext_fields=V1))
    v2 = send_header(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields={LETTERS[k]: v for k, v in V1.items()}))
    assert v1 == v2
    assert (v1.producer_group, v1.topic, v1.queue_id, v1.born_timestamp, v1.max_reconsume_times) == (
        "pg", "orders", 2, 1700000000000, 16,
    )  # fmt: skip


def test_ali_ons_leaves_out_l_and_sends_k_as_a_boolean():
    ext = {LETTERS[k]: v for k, v in V1.items() if k != "maxReconsumeTimes"}
    ext["k"] = "true"  # a JSON true, as the header codec hands it
    header = send_header(RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=ext))
    assert header.unit_mode is True and header.max_reconsume_times is None


def test_a_missing_required_field_or_a_bad_number_is_named():
    with pytest.raises(HeaderFieldError, match="request code 10: the custom field topic is null"):
        send_header(RemotingCommand(RequestCode.SEND_MESSAGE, ext_fields={k: v for k, v in V1.items() if k != "topic"}))
    with pytest.raises(HeaderFieldError, match="queueId, 'x', is not a number"):
        send_header(RemotingCommand(RequestCode.SEND_MESSAGE, ext_fields={**V1, "queueId": "x"}))


def test_java_booleans():
    for text, expected in (("true", True), ("TRUE", True), ("1", False), ("yes", False), ("", False)):
        assert send_header(RemotingCommand(10, ext_fields={**V1, "unitMode": text})).unit_mode is expected
    # The C++ client marks its batches "1", which only the batch field takes as true.
    assert send_header(RemotingCommand(10, ext_fields={**V1, "batch": "1"})).batch is True


def test_pull_header_and_its_flags():
    ext = {"consumerGroup": "cg", "topic": "orders", "queueId": "1", "queueOffset": "10", "maxMsgNums": "32",
           "sysFlag": "3", "commitOffset": "8", "suspendTimeoutMillis": "15000", "subscription": "*",
           "subVersion": "0"}  # fmt: skip
    header = pull_header(RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=ext))
    assert header == PullHeader("cg", "orders", 1, 10, 32, 3, 8, 15000, "*", 0, "TAG")
    assert header.commits_offset and header.suspends
    no_commit = pull_header(RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields={**ext, "sysFlag": "2"}))
    assert not no_commit.commits_offset and no_commit.suspends


def test_reply_fields_are_strings():
    assert send_reply_fields("0A000002", 2, 41) == {"msgId": "0A000002", "queueId": "2", "queueOffset": "41"}
    assert send_reply_fields("id", 0, 0, "tx")["transactionId"] == "tx"
    assert pull_reply_fields(11, 0, 20) == {
        "nextBeginOffset": "11", "minOffset": "0", "maxOffset": "20", "suggestWhichBrokerId": "0",
    }  # fmt: skip
