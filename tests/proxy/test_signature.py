"""Authentication of the metadata the official RocketMQ 5 clients send (proxy/signature.py) against the secret keys
of a plain ACL file (acl/): the Python client's own Signature.metadata is the input, so a change of the client's
format shows here."""

import hashlib
import hmac

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rocketmq import ClientConfiguration, Credentials
from rocketmq.grpc_protocol import Code
from rocketmq.v5.util.signature import Signature

from acl.acl_file import parse_acl_text
from acl.errors import Forbidden, Unauthenticated
from proxy.signature import authenticate, parse_authorization
from proxy.status_codes import code_of, status_of

ACCESS_KEY = "RocketMQ"
SECRET_KEY = "12345678"
SECRETS = {ACCESS_KEY: SECRET_KEY, "another-key": "another-secret"}
DATE = "20261125T010203Z"


def client_metadata(access_key: str = ACCESS_KEY, secret_key: str = SECRET_KEY) -> list[tuple[str, str]]:
    """What the Python client 5.1.2 sends with these credentials (its own code, not a copy of it)."""
    config = ClientConfiguration("127.0.0.1:8081", Credentials(access_key, secret_key))
    return list(Signature.metadata(config, "mqgate-test@1@0@abc"))


def replaced(metadata: list[tuple[str, str]], key: str, value: str) -> list[tuple[str, str]]:
    return [(k, value if k == key else v) for k, v in metadata]


def header(credential: str, signature: str) -> list[tuple[str, str]]:
    authorization = f"MQv2-HMAC-SHA1 Credential={credential}, SignedHeaders=x-mq-date-time, Signature={signature}"
    return [("x-mq-date-time", DATE), ("authorization", authorization)]


def hex_signature(secret_key: str = SECRET_KEY, date: str = DATE) -> str:
    return hmac.new(secret_key.encode(), date.encode(), hashlib.sha1).hexdigest()


def refusal(metadata: object) -> str:
    with pytest.raises(Unauthenticated) as caught:
        authenticate(metadata, SECRETS, "acl.yml")  # type: ignore[arg-type]
    assert code_of(caught.value) == Code.UNAUTHORIZED
    return str(caught.value)


def test_the_python_clients_metadata_is_accepted():
    metadata = client_metadata()
    assert {key for key, _ in metadata} >= {"authorization", "x-mq-date-time", "x-mq-client-id"}
    assert authenticate(metadata, SECRETS) == ACCESS_KEY


def test_a_mapping_with_header_names_in_any_case_is_accepted():
    metadata = {key.upper(): value for key, value in client_metadata()}
    assert authenticate(metadata, SECRETS) == ACCESS_KEY


@given(
    access_key=st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters=",/"), min_size=1),
    secret_key=st.text(min_size=1),
    date=st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1),
)
def test_any_key_and_date_the_client_signs_is_accepted(access_key: str, secret_key: str, date: str):
    # Signature.sign is the client's own signing function.
    authorization = (
        f"MQv2-HMAC-SHA1 Credential={access_key}, SignedHeaders=x-mq-date-time, "
        f"Signature={Signature.sign(secret_key, date)}"
    )
    metadata = [("x-mq-date-time", date), ("authorization", authorization)]
    assert authenticate(metadata, {access_key: secret_key}) == access_key
    with pytest.raises(Unauthenticated, match="signature mismatch"):
        authenticate(metadata, {access_key: secret_key + "x"})


def test_a_wrong_secret_key_is_refused_without_repeating_the_signature():
    metadata = client_metadata(secret_key="not-the-secret")
    message = refusal(metadata)
    assert message.startswith(f"signature mismatch for access key '{ACCESS_KEY}'")
    assert "acl.yml" in message
    signature = dict(metadata)["authorization"].rsplit("Signature=", 1)[1]
    assert signature not in message


def test_a_tampered_date_is_refused():
    metadata = client_metadata()
    date = dict(metadata)["x-mq-date-time"]
    tampered = replaced(metadata, "x-mq-date-time", date[:-2] + ("0Z" if date[-2] != "0" else "1Z"))
    assert refusal(tampered).startswith("signature mismatch")


def test_an_unknown_access_key_is_refused():
    assert refusal(client_metadata(access_key="nobody-here")) == (
        "unknown access key 'nobody-here': no account of acl.yml has it"
    )


def test_a_client_without_credentials_is_told_so():
    # Python: Credential= and a signature made with an empty key; Java/C++: no authorization header at all.
    empty = client_metadata(access_key="", secret_key="")
    assert "Credential=," in dict(empty)["authorization"]
    assert "names no access key" in refusal(empty)
    no_header = [(k, v) for k, v in client_metadata() if k != "authorization"]
    assert refusal(no_header).startswith("no 'authorization' header")
    assert refusal([]).startswith("no 'authorization' header")


def test_a_missing_date_is_refused():
    metadata = [(k, v) for k, v in client_metadata() if k != "x-mq-date-time"]
    assert refusal(metadata).startswith("no 'x-mq-date-time' header")


@pytest.mark.parametrize(
    "credential",
    [f"{ACCESS_KEY}//Rocketmq", f"{ACCESS_KEY}/cn-hangzhou/RocketMQ"],
    ids=["go-client", "cpp-client"],
)
def test_region_and_service_after_the_access_key_are_ignored(credential: str):
    assert authenticate(header(credential, hex_signature()), SECRETS) == ACCESS_KEY


def test_an_upper_case_hex_signature_is_accepted():
    # The C# client sends its signature in upper case.
    assert authenticate(header(ACCESS_KEY, hex_signature().upper()), SECRETS) == ACCESS_KEY


@pytest.mark.parametrize(
    ("authorization", "expected"),
    [
        ("MQv2-HMAC-SHA1", "no space after the method"),
        ("Basic Credential=RocketMQ", "method 'Basic' is not supported"),
        ("MQv2-HMAC-SHA1 Credential=RocketMQ, Signature", "'Signature' has no '='"),
        ("MQv2-HMAC-SHA1 Credential=RocketMQ, Credential=other, Signature=00", "'Credential' given twice"),
        ("MQv2-HMAC-SHA1 SignedHeaders=x-mq-date-time, Signature=00", "no Credential"),
        ("MQv2-HMAC-SHA1 Credential=RocketMQ, SignedHeaders=x-mq-date-time", "no Signature"),
        ("MQv2-HMAC-SHA1 Credential=RocketMQ, Signature=" + "g" * 40, "is not 40 hex digits"),
        ("MQv2-HMAC-SHA1 Credential=RocketMQ, Signature=" + "a" * 38, "is not 40 hex digits"),
        ("MQv2-HMAC-SHA1 Credential=RocketMQ, Signature=" + "ab " * 20, "is not 40 hex digits"),
        ("MQv2-HMAC-SHA1 Credential=/x, Signature=" + "a" * 40, "names no access key"),
    ],
)
def test_a_malformed_header_is_refused_with_the_part_at_fault(authorization: str, expected: str):
    message = refusal([("x-mq-date-time", DATE), ("authorization", authorization)])
    assert expected in message


def test_a_signed_header_given_twice_or_as_bytes_is_refused():
    metadata = client_metadata()
    date = dict(metadata)["x-mq-date-time"]
    assert refusal([*metadata, ("x-mq-date-time", date)]) == "'x-mq-date-time' header given twice; send it once"
    as_bytes = [(k, v.encode() if k == "authorization" else v) for k, v in metadata]
    assert refusal(as_bytes).startswith("'authorization' header is binary")


def test_unsigned_pairs_and_blank_items_are_ignored_as_rocketmq_does():
    authorization = f"MQv2-HMAC-SHA1 Credential={ACCESS_KEY},, Region=x, Signature={hex_signature()},"
    assert parse_authorization(authorization).access_key == ACCESS_KEY
    assert authenticate([("x-mq-date-time", DATE), ("authorization", authorization)], SECRETS) == ACCESS_KEY


ACL_FILE = """\
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
  - accessKey: 76543210
    secretKey: 01234567
"""


def test_an_acl_file_s_secret_keys_authenticate_the_client():
    access = parse_acl_text(ACL_FILE, "plain_acl.yml")
    assert authenticate(client_metadata(), access.secret_keys, access.source) == ACCESS_KEY
    # YAML would read 01234567 as an octal number; the file's text is the key the client is given.
    assert authenticate(client_metadata("76543210", "01234567"), access.secret_keys, access.source) == "76543210"
    with pytest.raises(Unauthenticated, match=r"signature mismatch for access key 'RocketMQ'.*plain_acl\.yml"):
        authenticate(client_metadata(secret_key="1234567"), access.secret_keys, access.source)


def test_a_refusal_of_access_control_is_answered_in_its_code():
    forbidden = Forbidden(
        "access key 'RocketMQ' lacks PUB on topic 'a'", access_key="RocketMQ", kind="topic", name="a", action="PUB"
    )
    assert code_of(forbidden) == Code.FORBIDDEN
    assert status_of(forbidden).message == str(forbidden)
    assert code_of(Unauthenticated("unknown access key 'x'")) == Code.UNAUTHORIZED
