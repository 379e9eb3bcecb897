"""Exceptions of the gRPC endpoint's access control, in one place with the protocol code each is answered with.

    AccessError                    a request refused by access control; `code` is its apache.rocketmq.v2.Code
    ├── Unauthenticated            no valid signature: missing or malformed authorization header, unknown access
    │                              key, signature mismatch, missing x-mq-date-time (Code.UNAUTHORIZED)
    └── Forbidden                  authenticated, but the account lacks the permission (Code.FORBIDDEN)
    AclFileError                   an ACL file (plain_acl.yml) cannot be used: `file:line:column: reason`

The endpoint answers an AccessError with `Status(code=error.code, message=str(error))`, so the client reads the
reason. RocketMQ 5.3's proxy answers both refusals with UNAUTHORIZED and 5.1's with the gRPC status
PERMISSION_DENIED; FORBIDDEN for a missing permission tells the client that its credentials are fine and only its
account's permissions need changing (the official clients raise a distinct ForbiddenException for it).
"""

from __future__ import annotations

from typing import ClassVar

from proxy.errors import ProxyError
from proxy.stubs import Code


class AccessError(ProxyError):
    """A request refused by access control. `code` is the apache.rocketmq.v2.Code to answer with."""

    code: ClassVar[int]


class Unauthenticated(AccessError):
    """The request does not prove who sent it: the message says which part of the metadata is wrong."""

    code = Code.UNAUTHORIZED


class Forbidden(AccessError):
    """The sender is known but its account lacks the permission; names the account, resource and permission."""

    code = Code.FORBIDDEN

    def __init__(self, message: str, *, access_key: str, kind: str, name: str, action: str) -> None:
        super().__init__(message)
        self.access_key = access_key
        self.kind = kind
        self.name = name
        self.action = action


class AclFileError(ProxyError, ValueError):
    """An ACL file is refused. Prints as `file:line:column: reason` (1-based), the position of the offending node;
    the reason names the account (by index and accessKey) and the key at fault."""

    def __init__(self, path: str, line: int, column: int, reason: str) -> None:
        super().__init__(f"{path}:{line}:{column}: {reason}")
        self.path = path
        self.line = line
        self.column = column
        self.reason = reason
