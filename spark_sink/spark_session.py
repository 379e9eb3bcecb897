"""The process's one Spark session, shared by the Spark sinks running in it.

PySpark allows one SparkContext (one JVM) per Python process, so every sink task in mqgate uses the same session;
they must agree on `spark.master`. The session is started by the first task that needs it and stopped when the
last one releases it. Starting takes seconds (a JVM is launched): call `acquire` and `release` from a thread,
never from the event loop. Started outside the main thread, PySpark leaves mqgate's SIGINT handler alone.

A JVM that died (killed, out of memory) is noticed at the next `acquire`, and a new one is started. A start
that fails is tried again, up to START_ATTEMPTS times.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, InvalidStateError
from typing import TYPE_CHECKING, Any

from spark_sink.errors import SparkSessionError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

APP_NAME = "mqgate-spark-sink"
# Our defaults, each overridable by a spark.* key of the connector config: no web UI (port 4040 would be taken
# by surprise), no progress bar on mqgate's stderr, timestamps shown in UTC as the dt partitions are.
DEFAULT_SETTINGS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
}

# A local master (local, local[N], local[*]) runs the executors in the driver's JVM: it needs no address other
# hosts reach, so it binds loopback. Otherwise Spark looks for a non-loopback interface itself and says so on
# mqgate's stderr ("Your hostname ... resolves to a loopback address ...; using 192.0.2.2 instead"). A cluster
# master (spark://) keeps Spark's own choice: its executors must reach the driver.
LOCAL_MASTER_SETTINGS = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
}
# Read by the JVM's launcher (Utils.localIpAddress), before any spark.* setting: set for a local master unless
# the user's environment sets it.
LOCAL_IP_ENV = "SPARK_LOCAL_IP"

# Starts of the JVM before a task fails (see _start), a second apart.
START_ATTEMPTS = 3
START_RETRY_S = 1.0

_lock = threading.Lock()
_session: SparkSession | None = None
_master: str | None = None
_users = 0


def alive(session: SparkSession) -> bool:
    """Whether the session's JVM still answers."""
    try:
        return not session.sparkContext._jsc.sc().isStopped()
    except Exception:  # py4j: the JVM is gone
        return False


def _forget_dead_jvm() -> None:
    # PySpark keeps the dead gateway in class attributes and would hand it out again.
    from pyspark import SparkContext
    from pyspark.sql import SparkSession

    SparkContext._active_spark_context = None
    SparkContext._gateway = None
    SparkContext._jvm = None
    SparkSession._instantiatedSession = None
    SparkSession._activeSession = None


def _start(builder: Any, master: str) -> SparkSession:
    """Start the JVM and its session, trying START_ATTEMPTS times: PySpark forks the JVM's launcher with a
    preexec_fn, which can fail in a process whose other threads (gRPC's, the store's) hold locks at the moment of
    the fork; the child then dies before it sends its port (JAVA_GATEWAY_EXITED), and a second fork succeeds."""
    for attempt in range(1, START_ATTEMPTS + 1):
        log.info("starting Spark on %s%s", master, f" (attempt {attempt})" if attempt > 1 else "")
        try:
            session: SparkSession = builder.getOrCreate()
            return session
        except Exception as exc:
            _forget_dead_jvm()
            if attempt == START_ATTEMPTS:
                raise SparkSessionError(
                    f"cannot start Spark on {master!r}: {exc}; is Java 17 or later installed (java -version)?"
                ) from exc
            log.warning("starting Spark on %s failed (%s); trying again in %.0f s", master, exc, START_RETRY_S)
            time.sleep(START_RETRY_S)
    raise AssertionError("unreachable")


def is_local_master(master: str) -> bool:
    return master == "local" or master.startswith("local[")


def acquire(master: str, settings: Mapping[str, str] | None = None) -> SparkSession:
    """The shared session on `master`, started if needed (blocking: seconds)."""
    global _session, _master, _users
    with _lock:
        if _session is not None and not alive(_session):
            log.warning("the Spark JVM on %s is gone; starting a new one", _master)
            _forget_dead_jvm()
            _session = None
        if _session is not None and master != _master:
            raise SparkSessionError(
                f"spark.master {master!r}: this process already runs Spark on {_master!r}, and PySpark allows one "
                "Spark per process; give every Spark sink the same spark.master"
            )
        if _session is None:
            from pyspark.sql import SparkSession

            builder = SparkSession.builder.master(master).appName(APP_NAME)
            local = is_local_master(master)
            if local:
                os.environ.setdefault(LOCAL_IP_ENV, "127.0.0.1")
            defaults = {**DEFAULT_SETTINGS, **(LOCAL_MASTER_SETTINGS if local else {})}
            for key, value in {**defaults, **(settings or {})}.items():
                builder = builder.config(key, value)
            _session = _start(builder, master)
            _master = master
        _users += 1
        return _session


def acquire_in_background(master: str, settings: Mapping[str, str] | None = None) -> Future[SparkSession]:
    """`acquire` in a thread of its own, whose future the caller awaits (asyncio.wrap_future).

    The thread is a daemon: a stop (SIGTERM) while the JVM starts ends the process at once instead of waiting
    the seconds the start takes (the JVM, whose standard input closes with the process, exits too). A caller that
    cancels the future before the session is there gives it back: the thread releases what it acquired."""
    future: Future[SparkSession] = Future()

    def run() -> None:
        # The future stays pending (not "running") while the JVM starts, so that the caller can still cancel it.
        if future.cancelled():
            return
        try:
            session = acquire(master, settings)
        except BaseException as exc:
            with contextlib.suppress(InvalidStateError):  # cancelled: nobody waits for the error
                future.set_exception(exc)
            return
        try:
            future.set_result(session)
        except InvalidStateError:  # cancelled while it started
            release()

    threading.Thread(target=run, name="spark-session-start", daemon=True).start()
    return future


def release() -> None:
    """Give the session back; the last user stops it (blocking)."""
    global _session, _master, _users
    with _lock:
        _users -= 1
        if _users > 0 or _session is None:
            return
        session, _session, _master = _session, None, None
        if alive(session):
            log.info("stopping Spark")
            session.stop()
        else:
            _forget_dead_jvm()
