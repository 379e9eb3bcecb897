"""RocketMQ's plain ACL signature on remoting requests (AclClientRPCHook, AclUtils, AclSigner), without I/O.

A client with credentials adds `AccessKey` (and `SecurityToken` if it has one) to a request's extFields, then
`Signature`: the base64 of HmacSHA1, keyed by its secret key, over the values of every other extField in the order of
their names (Java's String order: UTF-16 code units), joined, followed by the body. The server finds the secret of
the access key and computes the same; a request whose signature differs is refused.

An empty AccessKey is no credential (the C++ client always sends `AccessKey: ""` and a Signature).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable

from remoting.command import RemotingCommand

ACCESS_KEY = "AccessKey"
SECURITY_TOKEN = "SecurityToken"
SIGNATURE = "Signature"


def _java_order(name: str) -> bytes:
    return name.encode("utf-16-be")  # Java's String.compareTo compares UTF-16 code units


def signature(ext_fields: dict[str, str], body: bytes, secret_key: str) -> str:
    """The Signature of a request with these extFields (their Signature, if any, left out) and body."""
    content = "".join(ext_fields[name] for name in sorted(ext_fields, key=_java_order) if name != SIGNATURE)
    digest = hmac.new(secret_key.encode(), content.encode() + body, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


def sign(command: RemotingCommand, access_key: str, secret_key: str, security_token: str | None = None) -> None:
    """Add the credentials and their signature to a request (as AclClientRPCHook.doBeforeRequest)."""
    command.ext_fields[ACCESS_KEY] = access_key
    if security_token is not None:
        command.ext_fields[SECURITY_TOKEN] = security_token
    command.ext_fields[SIGNATURE] = signature(command.ext_fields, command.body, secret_key)


class SignatureRefused(ValueError):
    """A request whose credentials do not hold: answered NO_PERMISSION (16) with this message."""


def verified_access_key(command: RemotingCommand, secret_of: Callable[[str], str | None]) -> str | None:
    """The access key a request is signed by, None for a request without credentials (no AccessKey, or an empty
    one). Raises SignatureRefused for an unknown access key, a missing signature, or one that does not match."""
    access_key = command.ext_fields.get(ACCESS_KEY, "")
    if not access_key:
        return None
    secret = secret_of(access_key)
    if secret is None:
        raise SignatureRefused(f"access key {access_key!r} is not known")
    given = command.ext_fields.get(SIGNATURE)
    if not given:
        raise SignatureRefused(f"request of access key {access_key!r} carries no Signature")
    expected = signature(command.ext_fields, command.body, secret)
    if not hmac.compare_digest(given, expected):
        raise SignatureRefused(f"request of access key {access_key!r}: the signature does not match its secret key")
    return access_key
