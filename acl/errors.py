"""Exceptions of the plain ACL, in one place. Each door answers a refusal in its own protocol's words.

    AclError                       base of this package's exceptions
    ├── AccessError                a request refused by access control
    │   ├── Unauthenticated        no valid credentials: unknown access key, missing or wrong signature (the gRPC
    │   │                          endpoint's authorization header and x-mq-date-time, the remoting port's extFields)
    │   └── Forbidden              authenticated, but the account lacks the permission
    └── AclFileError               an ACL file (plain_acl.yml) cannot be used: `file:line:column: reason`

The message says what was wrong and what to change, so each door sends it to the client as it is:
- gRPC (proxy/status_codes.py): `Status(code, message)` with Code.UNAUTHORIZED or Code.FORBIDDEN. RocketMQ 5.3's
  proxy answers both refusals with UNAUTHORIZED and 5.1's with the gRPC status PERMISSION_DENIED; FORBIDDEN for a
  missing permission tells the client that its credentials are fine and only its account's permissions need
  changing (the official clients raise a distinct ForbiddenException for it).
- remoting (the broker's remoting port): NO_PERMISSION (16), the message as the response's remark.
"""

from __future__ import annotations


class AclError(Exception):
    """Base class of the plain ACL's exceptions."""


class AccessError(AclError):
    """A request refused by access control."""


class Unauthenticated(AccessError):
    """The request does not prove who sent it: the message says which part of its credentials is wrong."""


class Forbidden(AccessError):
    """The sender is known but its account lacks the permission; names the account, resource and permission."""

    def __init__(self, message: str, *, access_key: str, kind: str, name: str, action: str) -> None:
        super().__init__(message)
        self.access_key = access_key
        self.kind = kind
        self.name = name
        self.action = action


class AclFileError(AclError, ValueError):
    """An ACL file is refused. Prints as `file:line:column: reason` (1-based), the position of the offending node;
    the reason names the account (by index and accessKey) and the key at fault."""

    def __init__(self, path: str, line: int, column: int, reason: str) -> None:
        super().__init__(f"{path}:{line}:{column}: {reason}")
        self.path = path
        self.line = line
        self.column = column
        self.reason = reason
