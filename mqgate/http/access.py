"""Who may use mqgate's HTTP port, and the log of what they changed.

With neither `[http] token` nor `[http] admin_users` set, the port is open to whoever reaches it: it binds to
127.0.0.1 by default, and a warning is logged when it is bound elsewhere so. Otherwise every request needs one of:

- `Authorization: Bearer TOKEN` with `[http] token` (as the connector API always had; Prometheus scrapes so);
- HTTP Basic with a user of the password file (`[mqtt] password_file`, the MQTT users' Mosquitto file) who is
  named in `[http] admin_users`: the admin role. A user of the file who is not named there is refused with 403;
- HTTP Basic with any user name and the token as the password, so a browser's own login prompt opens the
  dashboard where only a token is set.

A request without credentials or with wrong ones is answered 401 with `WWW-Authenticate` for both schemes (a
browser then asks for a user and password); a known user without the admin role 403. Each answer says why.

Every request that may change something (any method but GET, HEAD and OPTIONS) is logged once answered, on the
`mqgate.audit` logger: who (token, user name or anonymous), from where, the method and path, and the status.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web
from aiohttp.typedefs import Middleware

from mqtt_bridge.access.password_file import PasswordFile

log = logging.getLogger(__name__)
audit_log = logging.getLogger("mqgate.audit")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
ErrorResponse = Callable[[int, str, dict[str, str]], web.Response]
# Where a request's verified identity is kept for the handlers and the audit line.
IDENTITY_KEY = web.RequestKey("mqgate_identity", str)
READ_ONLY_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# One header per scheme: browsers read a list of challenges in one header poorly, and look for Basic to prompt.
CHALLENGES = ('Basic realm="mqgate", charset="UTF-8"', 'Bearer realm="mqgate"')
# Basic credentials already checked, by digest: the password file's PBKDF2 hash costs milliseconds a request,
# and a dashboard asks every few seconds. Bounded so that a client trying passwords cannot grow it.
MAX_REMEMBERED_LOGINS = 64


@dataclass(slots=True, frozen=True)
class Access:
    token: str | None
    admin_users: frozenset[str]
    passwords: PasswordFile | None

    @property
    def open(self) -> bool:
        return self.token is None and not self.admin_users


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class _Checker:
    def __init__(self, access: Access) -> None:
        self.access = access
        self._remembered: dict[bytes, str] = {}

    def identity(self, request: web.Request) -> str:
        """Who the request is from ("token", "user NAME"), or _Refused saying why not."""
        header = request.headers.get("Authorization", "")
        scheme, _, given = header.partition(" ")
        scheme, given = scheme.lower(), given.strip()
        token = self.access.token
        if scheme == "bearer" and given:
            if token is not None and hmac.compare_digest(given.encode(), token.encode()):
                return "token"
            raise _Refused(401, "invalid bearer token" if token is not None else "no bearer token is configured")
        if scheme == "basic" and given:
            return self._basic(given)
        raise _Refused(401, self._how())

    def _how(self) -> str:
        ways = []
        if self.access.token is not None:
            ways.append("the header 'Authorization: Bearer <token>' ([http] token)")
        if self.access.admin_users:
            ways.append("HTTP Basic with a user of [http] admin_users and its password")
        return "authentication required: send " + " or ".join(ways)

    def _basic(self, given: str) -> str:
        try:
            user, sep, password = base64.b64decode(given, validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise _Refused(401, "malformed Basic credentials: expected base64 of USER:PASSWORD") from None
        if not sep:
            raise _Refused(401, "malformed Basic credentials: expected base64 of USER:PASSWORD")
        digest = hashlib.sha256(given.encode()).digest()
        known = self._remembered.get(digest)
        if known is not None:
            return known
        token = self.access.token
        if token is not None and hmac.compare_digest(password.encode(), token.encode()):
            identity = "token"
        else:
            passwords = self.access.passwords
            if passwords is None or not passwords.check(user, password.encode()):
                raise _Refused(401, f"user {user!r}: unknown user or wrong password")
            if user not in self.access.admin_users:
                raise _Refused(403, f"user {user!r} has no admin role: add it to [http] admin_users")
            identity = f"user {user}"
        if len(self._remembered) >= MAX_REMEMBERED_LOGINS:
            self._remembered.clear()
        self._remembered[digest] = identity
        return identity


def access_middleware(access: Access, error_response: ErrorResponse) -> Middleware:
    """Check every request as the module says (none when the access is open) and log those that may change
    something."""
    checker = None if access.open else _Checker(access)

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if checker is None:
            identity = "anonymous"
        else:
            try:
                identity = checker.identity(request)
            except _Refused as refused:
                answer = error_response(refused.status, str(refused), {})
                if refused.status == 401:
                    for challenge in CHALLENGES:
                        answer.headers.add("WWW-Authenticate", challenge)
                return answer
        request[IDENTITY_KEY] = identity
        if request.method in READ_ONLY_METHODS:
            return await handler(request)
        status = 500
        try:
            response = await handler(request)
            status = response.status
            return response
        except web.HTTPException as exc:
            status = exc.status
            raise
        finally:
            audit_log.info("%s from %s: %s %s -> %d", identity, request.remote, request.method, request.path_qs, status)

    return check
