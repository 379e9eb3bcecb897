"""RocketMQ's plain ACL signature (remoting/acl_signature.py): AclSignerTest's own vector, Java's order of field
names, the body signed too, and verification refusing unknown keys, missing or wrong signatures."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.acl_signature import SignatureRefused, sign, signature, verified_access_key
from remoting.command import RemotingCommand


def test_rocketmqs_own_vector():
    # AclSignerTest.calSignatureTest: calSignature("RocketMQ", "12345678").
    assert signature({"a": "RocketMQ"}, b"", "12345678") == "IUc8rrO/0gDch8CjObLQsW2rsiA="
    assert signature({"a": "Rocket", "b": "MQ"}, b"", "12345678") == "IUc8rrO/0gDch8CjObLQsW2rsiA="
    assert signature({"a": "Rocket"}, b"MQ", "12345678") == "IUc8rrO/0gDch8CjObLQsW2rsiA="  # the body follows


def test_names_are_in_javas_order_and_the_signature_itself_is_left_out():
    # U+FF21 sorts after U+1F600 in UTF-16 code units (0xFF21 > 0xD83D), before it in code points.
    fields = {"\U0001f600": "x", "\uff21": "y", "Signature": "ignored"}
    assert signature(fields, b"", "k") == signature({"1": "x", "2": "y"}, b"", "k")


@given(st.dictionaries(st.text(min_size=1, max_size=5), st.text(max_size=8), max_size=5), st.binary(max_size=50))
def test_a_signed_request_verifies_and_any_change_does_not(fields, body):
    command = RemotingCommand(10, ext_fields=dict(fields), body=body)
    sign(command, "rocketmq2", "12345678")
    assert verified_access_key(command, {"rocketmq2": "12345678"}.get) == "rocketmq2"
    changed = RemotingCommand(10, ext_fields=dict(command.ext_fields), body=body + b"!")
    with pytest.raises(SignatureRefused, match="does not match"):
        verified_access_key(changed, {"rocketmq2": "12345678"}.get)


def test_credentials_that_do_not_hold_are_refused_and_none_is_anonymous():
    known = {"ak": "sk"}.get
    assert verified_access_key(RemotingCommand(10, ext_fields={"AccessKey": "", "Signature": "x"}), known) is None
    assert verified_access_key(RemotingCommand(10), known) is None
    with pytest.raises(SignatureRefused, match="not known"):
        verified_access_key(RemotingCommand(10, ext_fields={"AccessKey": "who"}), known)
    with pytest.raises(SignatureRefused, match="no Signature"):
        verified_access_key(RemotingCommand(10, ext_fields={"AccessKey": "ak"}), known)
