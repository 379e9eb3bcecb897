"""Who sent a gRPC request: the MQv2-HMAC-SHA1 signature the official RocketMQ 5 clients put in every call's metadata.

    authorization:  MQv2-HMAC-SHA1 Credential=<access key>, SignedHeaders=x-mq-date-time, Signature=<hex>
    x-mq-date-time: 20261125T010203Z

Signature is HMAC-SHA1(key = the account's secret key, message = the x-mq-date-time value, both UTF-8) in hex. The
clients also send x-mq-client-id, x-mq-request-id, x-mq-language and x-mq-namespace; none of them is signed.

The header is read as RocketMQ's proxy reads it (DefaultAuthenticationContextBuilder, and AuthorizationHeader in
ACL 1.0): the method is the first word; the rest splits at ',' into trimmed `Name=value` pairs (split at the first
'='); unknown names are ignored. What the clients differ in is accepted:
- Credential: the access key is the part before the first '/'. The Java, Python, C#, Rust and Node.js clients send
  the bare key; the Go client sends `<ak>//Rocketmq` and the C++ client `<ak>/<region>/<service>`.
- Signature: hex in either case (the C# client sends upper case, the Python and Go clients lower case).
- SignedHeaders: ignored, as RocketMQ does: the signed content is always the x-mq-date-time value.
- The Python client sends the header even without credentials (`Credential=`, signed with an empty key); the Java
  and C++ clients then send none. Both are refused, each with its own message.

Stricter than RocketMQ, on purpose: a method other than MQv2-HMAC-SHA1 is refused (RocketMQ ignores the method,
but the signature can only be checked as HMAC-SHA1), and so is a header or pair given twice (RocketMQ takes the last
one, so a proxy that added a header would silently change who the caller is).

No clock-skew check: the Python client formats its local time with a 'Z' suffix (`datetime.now()`, as the Java
and C# clients do with their local time), so comparing the date with UTC would refuse every client whose machine is
not on UTC. RocketMQ does not check it either. The consequence: a captured header stays valid forever, so the
endpoint should run behind TLS where the network is not trusted, and no message here repeats a signature.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from acl.errors import Unauthenticated

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"
ALGORITHM = "MQv2-HMAC-SHA1"
_CREDENTIAL = "Credential"
_SIGNATURE = "Signature"
# The Go and C++ clients append region and service to the access key: `<ak>/<region>/<service>`.
_CREDENTIAL_SEPARATOR = "/"
# HMAC-SHA1 is 20 bytes, 40 hex digits; anything else cannot be a signature of this scheme.
_SIGNATURE_HEX = re.compile(rf"[0-9A-Fa-f]{{{2 * hashlib.sha1().digest_size}}}")
_EXPECTED = f"expected '{ALGORITHM} Credential=<access key>, SignedHeaders={DATE_TIME}, Signature=<hex>'"

# A call's metadata as grpc gives it (`context.invocation_metadata()`: (key, value) pairs, values of `-bin` keys as
# bytes), or a mapping.
Metadata = Mapping[str, str | bytes] | Iterable[tuple[str, str | bytes]]


@dataclass(frozen=True, slots=True)
class Authorization:
    """The parts of an authorization header that authentication uses."""

    access_key: str
    signature: bytes


def sign(secret_key: str, date_time: str) -> bytes:
    """The signature a client with `secret_key` sends for `date_time` (raw bytes; the header carries them in hex)."""
    return hmac.new(secret_key.encode(), date_time.encode(), hashlib.sha1).digest()


def parse_authorization(value: str) -> Authorization:
    """Reads an authorization header; raises Unauthenticated naming the part that is wrong."""
    method, space, rest = value.partition(" ")
    if not space:
        raise Unauthenticated(f"malformed '{AUTHORIZATION}' header: no space after the method; {_EXPECTED}")
    if method != ALGORITHM:
        raise Unauthenticated(
            f"'{AUTHORIZATION}' header: method {method[:40]!r} is not supported; only {ALGORITHM}, as the "
            "official RocketMQ 5 clients send"
        )
    pairs: dict[str, str] = {}
    for item in rest.split(","):
        item = item.strip()
        if not item:
            continue
        name, equals, pair_value = item.partition("=")
        if not equals:
            raise Unauthenticated(f"malformed '{AUTHORIZATION}' header: {name[:40]!r} has no '='; {_EXPECTED}")
        if name in pairs:
            raise Unauthenticated(f"malformed '{AUTHORIZATION}' header: {name[:40]!r} given twice; send it once")
        pairs[name] = pair_value
    if _CREDENTIAL not in pairs:
        raise Unauthenticated(f"malformed '{AUTHORIZATION}' header: no Credential; {_EXPECTED}")
    if _SIGNATURE not in pairs:
        raise Unauthenticated(f"malformed '{AUTHORIZATION}' header: no Signature; {_EXPECTED}")
    access_key = pairs[_CREDENTIAL].split(_CREDENTIAL_SEPARATOR, 1)[0]
    if not access_key:
        raise Unauthenticated(
            f"'{AUTHORIZATION}' header: the Credential names no access key, so the client has no credentials "
            "configured (the Python client then sends 'Credential='); give the client an access key and secret key"
        )
    hex_signature = pairs[_SIGNATURE]
    if _SIGNATURE_HEX.fullmatch(hex_signature) is None:
        raise Unauthenticated(
            f"malformed '{AUTHORIZATION}' header: the Signature of access key {access_key!r} is not 40 hex digits "
            "(an HMAC-SHA1)"
        )
    return Authorization(access_key, bytes.fromhex(hex_signature))


def authenticate(metadata: Metadata, secret_keys: Mapping[str, str], source: str = "the ACL file") -> str:
    """The access key that signed the call whose metadata this is, checked against `secret_keys` (access key to
    secret key, read from `source`); raises Unauthenticated saying what is missing or wrong."""
    headers = _signed_headers(metadata)
    authorization = headers.get(AUTHORIZATION)
    if not authorization:
        raise Unauthenticated(
            f"no '{AUTHORIZATION}' header: the client sent no credentials and access control is on; give the "
            "client an access key and secret key (Python: ClientConfiguration(endpoints, Credentials(ak, sk)))"
        )
    date_time = headers.get(DATE_TIME)
    if not date_time:
        raise Unauthenticated(
            f"no '{DATE_TIME}' header: it is the signed content of '{AUTHORIZATION}', and the official clients "
            "always send it"
        )
    parsed = parse_authorization(authorization)
    secret_key = secret_keys.get(parsed.access_key)
    if secret_key is None:
        raise Unauthenticated(f"unknown access key {parsed.access_key!r}: no account of {source} has it")
    if not hmac.compare_digest(sign(secret_key, date_time), parsed.signature):
        raise Unauthenticated(
            f"signature mismatch for access key {parsed.access_key!r}: the client's secret key is not the one "
            f"{source} gives this account (or the signed x-mq-date-time was changed on the way)"
        )
    return parsed.access_key


def _signed_headers(metadata: Metadata) -> dict[str, str]:
    """The authorization and x-mq-date-time values of `metadata`; refuses either given twice or as bytes."""
    pairs = metadata.items() if isinstance(metadata, Mapping) else metadata
    found: dict[str, str] = {}
    for key, value in pairs:
        # HTTP/2 header names are lower case; grpc already lowers them, a mapping built by hand may not have.
        name = key.lower()
        if name not in (AUTHORIZATION, DATE_TIME):
            continue
        if name in found:
            raise Unauthenticated(f"'{name}' header given twice; send it once")
        if not isinstance(value, str):
            raise Unauthenticated(f"'{name}' header is binary; send it as text, as the official clients do")
        found[name] = value
    return found
