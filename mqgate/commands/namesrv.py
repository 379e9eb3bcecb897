"""`mqgate namesrv`: a NameServer alone (as RocketMQ's mqnamesrv), for brokers that register with it
([broker] namesrv_addr, --namesrv-addr) and the clients that ask it for routes. It prints one line,
`ready namesrv=HOST:PORT`, once it listens, runs until SIGTERM or SIGINT and closes; a port it cannot listen on
ends it with exit code 2 and the error `mqgate serve` gives for one. It keeps nothing on disk and reads no
configuration file.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from typing import Any

from mqgate.config.values import LOG_LEVELS
from mqgate.listen_errors import ROCKETMQ_BUSY_HINT, cannot_listen, listen_reason
from mqgate.process import configure_logging, format_ready, run, stop_on_signals
from namesrv.config import NamesrvConfig
from namesrv.server import NameServer

log = logging.getLogger(__name__)

EXIT_OK = 0

NAMESRV_EPILOG = """\
exit codes: 0 after a clean stop (SIGTERM or SIGINT), 2 a port it cannot listen on or a bad command line

examples:
  mqgate namesrv                          on 0.0.0.0:9876, RocketMQ's port
  mqgate namesrv --port 0 --host 127.0.0.1
  mqgate serve --namesrv-addr 10.0.0.5:9876 --cluster-name C --broker-name broker-b"""


def add_namesrv_parser(commands: Any, formatter: type[argparse.HelpFormatter]) -> None:
    defaults = NamesrvConfig()
    namesrv = commands.add_parser(
        "namesrv",
        formatter_class=formatter,
        help="run a NameServer alone until SIGTERM/SIGINT (as RocketMQ's mqnamesrv)",
        description=__doc__,
        epilog=NAMESRV_EPILOG,
    )
    namesrv.add_argument(
        "--port",
        type=int,
        default=defaults.port,
        metavar="N",
        help=f"port to listen on; 0 picks a free one, named in the ready line (default {defaults.port})",
    )
    namesrv.add_argument(
        "--host", default=defaults.host, metavar="HOST", help=f"address to bind to (default {defaults.host})"
    )
    namesrv.add_argument(
        "--log-level",
        type=str.upper,
        choices=LOG_LEVELS,
        default="INFO",
        metavar="LEVEL",
        help=f"logging on stderr: {', '.join(LOG_LEVELS)} (default INFO)",
    )
    namesrv.set_defaults(handler=cmd_namesrv, parser=namesrv)


def cmd_namesrv(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        args.parser.error(f"--port {args.port}: a port goes from 0 to 65535 (0: a free one)")
    configure_logging(args.log_level)

    def ready(line: str) -> None:
        print(line, flush=True)

    run(run_namesrv(args.host, args.port, ready))
    return EXIT_OK


async def run_namesrv(host: str, port: int, ready: Callable[[str], None]) -> None:
    """Serve a NameServer on HOST:PORT until SIGTERM or SIGINT, calling `ready` with the ready line once it
    listens; raises ConfigError if it cannot listen."""
    with stop_on_signals() as stop:
        namesrv = NameServer()
        try:
            bound = await namesrv.start(host, port)
        except OSError as exc:
            await namesrv.close()
            raise cannot_listen(
                "namesrv", "port", None, host, port, listen_reason(exc), ROCKETMQ_BUSY_HINT, setting="--port"
            ) from None
        try:
            log.info("NameServer on %s:%d", host, bound)
            if not stop.is_set():
                ready(format_ready([f"namesrv={host}:{bound}"]))
                await stop.wait()
        finally:
            await namesrv.close()
            log.info("NameServer closed")
