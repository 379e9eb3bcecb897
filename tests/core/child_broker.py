"""Run a broker in a child process that SIGKILLs itself, for crash tests: the child opens the store and broker in
a directory, runs the test's code, and is killed by a watcher thread when the test's condition holds (checked
every millisecond, whatever the event loop is doing), as a crash at that moment would."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from .conftest import SMALL_STORE

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = """
import asyncio, json, os, signal, threading, time
from pathlib import Path
from core import Broker, BrokerConfig, Producer
from core.store.config import FlushMode, StoreConfig
from core.store.message_store import MessageStore

def kill_when(condition):
    def watch():
        while not condition():
            time.sleep(0.001)
        # Straight to the pipe: print writes a line and its end apart, so a line the loop was printing could be
        # split by this one. A line still in the buffer is lost with the process, as it was not yet said.
        os.write(1, b"killed\\n")
        os.kill(os.getpid(), signal.SIGKILL)
    threading.Thread(target=watch, daemon=True).start()

async def open_broker(directory, config, flush_mode="ASYNC_FLUSH"):
    store = MessageStore(StoreConfig(store_dir=directory / "store", flush_mode=FlushMode[flush_mode], **SMALL_STORE))
    store.open()
    broker = Broker(store, directory / "config", config)
    await broker.start()
    return broker
"""


def run_killed_child(directory: Path, code: str, timeout: float = 120) -> str:
    """Run `code` (the body of `async def main()`, with `directory` a Path) in a child; it must end killed by
    kill_when. Returns the child's output."""
    source = (
        PRELUDE
        + f"SMALL_STORE = {SMALL_STORE!r}\n"
        + "async def main():\n"
        + f"    directory = Path({str(directory)!r})\n"
        + textwrap.indent(textwrap.dedent(code), "    ")
        + "\n    await asyncio.sleep(60)\n"
        + "asyncio.run(main())\n"
    )
    result = subprocess.run([sys.executable, "-c", source], cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    assert result.returncode == -signal.SIGKILL, result.stderr[-3000:]
    assert "killed" in result.stdout, result.stdout
    return result.stdout
