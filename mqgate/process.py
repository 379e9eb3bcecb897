"""What every `mqgate` command that runs a server shares (`serve`, `namesrv`): its logging, its ready line, its stop
signals, and the event loop it runs on. Light to import: a command that serves nothing does not load the doors.

The ready line is `ready` followed by `key=value` parts, one per part that serves, e.g.

    ready store=/srv/mqgate/data/store recovery=clean

so that scripts and tests wait for one line and read every address from it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import sys
from collections.abc import Callable, Coroutine, Iterator, Sequence
from typing import Any, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")

READY_PREFIX = "ready"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def format_ready(parts: Sequence[str]) -> str:
    """One line: `ready` and the `key=value` parts, separated by single spaces."""
    for part in parts:
        key, sep, value = part.partition("=")
        if not sep or not key or not value or any(char.isspace() for char in part):
            raise ValueError(f"ready line part {part!r}: expected key=value without spaces")
    return " ".join([READY_PREFIX, *parts])


def configure_logging(level: str) -> None:
    """Logs on stderr, one line each, for a command that runs a server (`serve`, `namesrv`) or opens the store."""
    logging.basicConfig(
        level=level,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)-7s %(name)s: %(message)s",
    )


@contextlib.contextmanager
def stop_on_signals() -> Iterator[asyncio.Event]:
    """An event set by the first SIGTERM or SIGINT; a later one is logged and ignored, so that a second Ctrl-C
    cannot interrupt a close halfway. The handlers are the running loop's until the block ends."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal(signum: signal.Signals) -> None:
        if stop.is_set():
            log.info("%s: already stopping", signum.name)
            return
        log.info("%s: stopping", signum.name)
        stop.set()

    for signum in STOP_SIGNALS:
        loop.add_signal_handler(signum, on_signal, signum)
    try:
        yield stop
    finally:
        for signum in STOP_SIGNALS:
            loop.remove_signal_handler(signum)


def _loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` on uvloop when it is installed, else on the default asyncio loop."""
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        return runner.run(main)
