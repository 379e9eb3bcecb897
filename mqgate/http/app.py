"""mqgate's one HTTP port: an aiohttp application that the HTTP APIs (the connector REST API today) add their
routes to before it starts, served by `mqgate serve` and named in the ready line as `http=HOST:PORT`.

Every error is answered as Kafka Connect answers, `{"error_code": 404, "message": "..."}`, whatever raised it:
a handler raises an aiohttp HTTP exception whose text is the message (or whose body is already such JSON, with
more fields), and the middleware here shapes the rest, including unknown routes and unexpected exceptions.
Who may use the port, and the log of changes, are mqgate.http.access's.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

from aiohttp import web
from aiohttp.typedefs import Middleware
from aiohttp.web_log import AccessLogger

from mqgate.http.access import Access, access_middleware
from mqgate.http.config import HttpConfig
from mqtt_bridge.access.password_file import PasswordFile

log = logging.getLogger(__name__)

# Request bodies are connector configs: small. aiohttp's default is 1 MiB too; named here as a decision.
MAX_BODY_BYTES = 1024 * 1024
JSON_CONTENT_TYPE = "application/json"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_body(status: int, message: str) -> dict[str, object]:
    return {"error_code": status, "message": message}


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> web.Response:
    return web.json_response(error_body(status, message), status=status, headers=headers)


def _message(request: web.Request, exc: web.HTTPException) -> str:
    if request.match_info.http_exception is exc or isinstance(exc, web.HTTPMethodNotAllowed):
        # No route matched: aiohttp's own text ("404: Not Found") says less than this.
        if isinstance(exc, web.HTTPMethodNotAllowed):
            allowed = ", ".join(sorted(exc.allowed_methods))
            return f"{request.method} is not allowed on {request.path}; allowed: {allowed}"
        return f"no resource {request.path} (the HTTP APIs are described in docs/)"
    text = exc.text or exc.reason
    prefix = f"{exc.status}: "
    return text.removeprefix(prefix) if text else exc.reason


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400 or exc.content_type == JSON_CONTENT_TYPE:
            raise
        # Allow (405) and WWW-Authenticate (401) stay; the body and its type are ours.
        headers = {key: value for key, value in exc.headers.items() if key.lower() in ("allow", "www-authenticate")}
        return error_response(exc.status, _message(request, exc), headers)
    except Exception as exc:  # a bug: logged with its traceback, answered as JSON, the server goes on
        log.exception("%s %s failed", request.method, request.path)
        return error_response(500, f"internal error: {type(exc).__name__}: {exc}")


def build_app(config: HttpConfig, passwords: PasswordFile | None = None) -> web.Application:
    """The application, with error shaping, access control (mqgate.http.access: the token, or the admin users of
    `passwords`) and the audit log of changes; HTTP APIs add their routes."""
    access = Access(config.token, frozenset(config.admin_users), passwords)
    if config.admin_users and passwords is None:
        raise ValueError("http admin_users: the users are checked against [mqtt] password_file, which is not set")
    middlewares: list[Middleware] = [json_errors, access_middleware(access, error_response)]
    app = web.Application(middlewares=middlewares, client_max_size=MAX_BODY_BYTES)
    app.router.add_get("/", _root)
    return app


async def _root(request: web.Request) -> web.Response:
    """What Kafka Connect's `GET /` answers: the server's version (a cheap check that the port serves)."""
    try:
        version = importlib.metadata.version("mqgate")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was not installed
        version = "unknown"
    return web.json_response({"name": "mqgate", "version": version})


# Each request answered, as aiohttp's access log line, at DEBUG: at INFO they were half the server's log (an open
# dashboard alone asks every 2 s). `--log-level DEBUG` shows them.
ACCESS_LOG = "mqgate.http.requests"


class _InfoAsDebug(logging.LoggerAdapter[logging.Logger]):
    """A logger whose info() is debug(): aiohttp's access logger writes its lines with info()."""

    def info(self, msg: object, *args: object, **kwargs: Any) -> None:
        self.debug(msg, *args, **kwargs)

    def isEnabledFor(self, level: int) -> bool:
        return self.logger.isEnabledFor(logging.DEBUG if level == logging.INFO else level)


class _DebugAccessLogger(AccessLogger):
    def __init__(self, logger: logging.Logger, log_format: str = AccessLogger.LOG_FORMAT) -> None:
        super().__init__(cast(logging.Logger, _InfoAsDebug(logger, {})), log_format)


class HttpServer:
    """`app` served on config.host:config.port until `close`."""

    def __init__(self, app: web.Application, config: HttpConfig) -> None:
        self.app = app
        self.config = config
        self._runner = web.AppRunner(app, access_log=logging.getLogger(ACCESS_LOG), access_log_class=_DebugAccessLogger)
        self.address = ""

    async def start(self) -> str:
        """Listen; return HOST:PORT as bound (the port chosen when config.port is 0)."""
        await self._runner.setup()
        # SO_REUSEADDR only, never SO_REUSEPORT: a port another process listens on must refuse the bind.
        site = web.TCPSite(self._runner, self.config.host, self.config.port, reuse_address=True)
        try:
            await site.start()
        except OSError:
            await self._runner.cleanup()
            raise
        host, port = self._runner.addresses[0][:2]
        self.address = f"{host}:{port}"
        return self.address

    async def close(self) -> None:
        await self._runner.cleanup()
