"""The index built in a process of its own (StoreConfig.index_process): `mqgate-index` reads the records the
dispatcher has made visible from the commit log and writes the index files (core.store.index.service), beside
the interpreter that appends instead of inside it.

Why: hashing a message's keys and writing their index entries took a quarter of what storing a message cost the
appending process (1.5 of 5.9 us for a 128-byte message with a unique id, measured in bench/HISTORY.md), and on
one interpreter the dispatcher thread's share is time the appender waits for the GIL. The second process runs it
on the other core.

What stays in the store's process: recovery builds what the index lacks before the child starts, as it always did
(the index is whole up to the log's end when the child takes over); queries, the checkpoint, retention and close
are requests to the child over a pipe. The child owns every index file from then on.

    store process                                  mqgate-index
    dispatcher round: target = dispatched   ----> reads records below target, indexes them
    checkpoint:  ("flush", upto)             <---> indexes up to `upto`, fdatasync, ("flushed", upto)
    query:       ("query", ..., upto)        <---> indexes up to `upto` first: a visible message is found
    retention:   ("delete_below", offset)    <---> ("deleted", files)
    close:       ("stop", upto)              <---> indexes, flushes, closes, ("stopped", upto), exits

`target` is a shared 64-bit value, written once per dispatch round (no message crosses the pipe per record).
Records below it are whole in the log: the dispatcher saw them appended. The child exits when the store's process
goes away (its end of the pipe reads EOF) and ignores SIGINT and SIGTERM, which are the store process's to handle;
a child that dies is started again by the next request, from what its files say is indexed (the page cache keeps
what it wrote). After a crash of the whole process, recovery rebuilds the index from the checkpoint's
`index_flushed`, which only a `flush` answer moves.
"""

from __future__ import annotations

import fcntl
import json
import logging
import mmap
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from core.store.errors import StoreError

log = logging.getLogger(__name__)

# How long the store waits for the child: to start (a new interpreter importing the store), and to answer a request
# (a query or flush may first index what the dispatcher made visible since: normally milliseconds).
START_TIMEOUT_S = 30.0
REQUEST_TIMEOUT_S = 30.0
# A query runs on the event loop: past this, it fails (IndexProcessError) rather than hold every client up while
# a restarted child catches up with the log.
QUERY_TIMEOUT_S = 5.0
# The child indexes this many records between two looks at the pipe, so a request waits for one chunk at most.
CHUNK_RECORDS = 4096
# The child's wait for a request while it has nothing to index: new records are noticed within this time.
IDLE_POLL_S = 0.002
# The format of mqgate's log lines (mqgate/cli.py): the child writes to the same stderr.
LOG_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
# Held (flock) while a child runs, in the index directory. A store process killed with SIGKILL leaves its child a
# few milliseconds to notice and exit (or, killed while starting one, the time the child takes to start): opening
# the store again waits for that, so that no writer from before the crash touches the index while recovery rebuilds
# it. The store's process takes the lock before it starts a child and the child inherits it, so that there is no
# moment when a child runs without it.
LOCK_NAME = "lock"
ORPHAN_WAIT_S = 10.0


def take_index_lock(index_dir: Path) -> int:
    """A descriptor holding the index directory's lock, taken once no index process of an earlier run holds it;
    raise IndexProcessError after ORPHAN_WAIT_S. Closing the descriptor (and every copy a child inherited)
    releases it."""
    index_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(index_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        deadline = time.monotonic() + ORPHAN_WAIT_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fd
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise IndexProcessError(
                        f"index {index_dir}: an index process of an earlier run still holds it after"
                        f" {ORPHAN_WAIT_S:.0f} s; stop it (it is named mqgate-index)"
                    ) from None
                time.sleep(0.01)
    except BaseException:
        os.close(fd)
        raise


def wait_for_orphan(index_dir: Path) -> None:
    """Return once no index process of an earlier run holds `index_dir`; raise IndexProcessError after
    ORPHAN_WAIT_S."""
    os.close(take_index_lock(index_dir))


TARGET = struct.Struct("=q")


class IndexProcessError(StoreError):
    """The index process could not be started or did not answer."""


class IndexProcess:
    """The store process's side: starts the child, tells it how far the log is dispatched, asks it for the rest.

    `advance` runs on the dispatcher thread; the requests on the checkpoint and retention threads and the event
    loop, one at a time (a lock). A request finds a dead child and starts it again first.
    """

    def __init__(self, index_dir: Path, slots: int, max_entries: int, commit_log_dir: Path, segment_size: int) -> None:
        self._args = (str(index_dir), slots, max_entries, str(commit_log_dir), segment_size)
        # The dispatched position, shared: a memory file both processes map (passed to the child as a descriptor).
        self._target_fd = os.memfd_create("mqgate-index-target")
        os.ftruncate(self._target_fd, TARGET.size)
        self._target = mmap.mmap(self._target_fd, TARGET.size)
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        # Every record below it is indexed in the files: the hand-over position, then each flush's answer. A child
        # started again reads the log from here.
        self._floor = 0
        self._number = 0  # of the last request: answers carry it back
        self.restarts = 0

    @property
    def pid(self) -> int | None:
        return None if self._process is None else self._process.pid

    def start(self, position: int) -> None:
        """Start the child: the index is whole below `position` (the dispatched end of the log at hand-over)."""
        self._floor = position
        TARGET.pack_into(self._target, 0, position)
        with self._lock:
            try:
                self._spawn()
            except BaseException:
                self._release()
                raise

    def advance(self, dispatched: int) -> None:
        """Every record below `dispatched` is in the log and visible: the child may index it."""
        if not self._target.closed:  # closed: a cut log's index is handed to another child (MessageStore.truncate)
            TARGET.pack_into(self._target, 0, dispatched)

    def flush(self, upto: int) -> int:
        """Index up to `upto` and make the index files durable; returns `upto`, for the checkpoint's index_flushed."""
        reply = self._request(("flush", upto))
        self._floor = max(self._floor, int(reply[1]))
        return int(reply[1])

    def query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int, upto: int) -> list[int]:
        """IndexService.query, once every record below `upto` (what was visible when asked) is indexed."""
        reply = self._request(("query", topic, key, max_num, begin_ms, end_ms, upto), QUERY_TIMEOUT_S)
        return list(reply[1])

    def delete_below(self, min_commit_log_offset: int) -> int:
        reply = self._request(("delete_below", min_commit_log_offset))
        return int(reply[1])

    def close(self, upto: int) -> int | None:
        """Index up to `upto`, flush, and stop the child; returns `upto` when it is durable, None if the child
        could not say so (the checkpoint then keeps its last index_flushed: recovery rebuilds the rest)."""
        with self._lock:
            process, conn = self._process, self._conn
            self._process = self._conn = None
            if process is None or conn is None:
                self._release()
                return None
            reached: int | None = None
            TARGET.pack_into(self._target, 0, upto)
            try:
                if process.poll() is None:
                    self._number += 1
                    conn.send((self._number, "stop", upto))
                    reply = self._answer(conn, self._number, time.monotonic() + REQUEST_TIMEOUT_S)
                    if reply is not None:
                        reached = int(reply[1])
            except (EOFError, OSError) as exc:
                log.error("index process %d did not stop cleanly: %s", process.pid, exc)
            finally:
                conn.close()
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                self._release()
            return reached

    def _spawn(self) -> None:
        # A new interpreter that imports only the store (`python -m core.store.index.process`): multiprocessing's
        # spawn would import the program's main module again (mqgate's whole CLI), fork would copy its threads' locks.
        lock = take_index_lock(Path(self._args[0]))
        try:
            ours, theirs = socket.socketpair()
        except BaseException:
            os.close(lock)
            raise
        arguments = [
            *self._args,
            self._floor,
            theirs.fileno(),
            self._target_fd,
            lock,
            logging.getLogger().getEffectiveLevel(),
        ]
        package_root = str(Path(__file__).resolve().parents[2])
        environment = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")])),
        }
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "core.store.index.child", json.dumps(arguments)],
                pass_fds=(theirs.fileno(), self._target_fd, lock),
                stdin=subprocess.DEVNULL,
                env=environment,
            )
        finally:
            theirs.close()
            os.close(lock)  # the child holds it now (or, if it did not start, nobody)
        parent = Connection(ours.detach())
        try:
            if not parent.poll(START_TIMEOUT_S):
                raise IndexProcessError(f"no answer within {START_TIMEOUT_S:.0f} s")
            reply = parent.recv()
            if reply[0] != "ready":
                raise IndexProcessError(str(reply[1]))
        except (EOFError, OSError, IndexProcessError) as exc:
            process.kill()
            process.wait()
            parent.close()
            raise IndexProcessError(f"index process for {self._args[0]} failed to start: {exc}") from None
        self._process, self._conn = process, parent
        log.info("index process %d serves %s, indexed below commit-log offset %d", process.pid, self._args[0], reply[1])

    def _request(self, request: tuple[Any, ...], timeout: float = REQUEST_TIMEOUT_S) -> tuple[Any, ...]:
        with self._lock:
            if self._target.closed:
                # Closed: a request from a thread that took this object before it was replaced must not start a
                # child of its own beside the new one (it would wait for the index lock the new one holds).
                raise IndexProcessError(f"index process: {request[0]!r} after close")
            for attempt in (1, 2):
                if self._process is None or self._process.poll() is not None:
                    if self._process is not None:
                        log.error(
                            "index process %d exited (code %s); starting it again",
                            self._process.pid,
                            self._process.returncode,
                        )
                        self.restarts += 1
                        if self._conn is not None:
                            self._conn.close()
                    self._spawn()
                process, conn = self._process, self._conn
                assert process is not None and conn is not None
                try:
                    self._number += 1
                    conn.send((self._number, *request))
                    reply = self._answer(conn, self._number, time.monotonic() + timeout)
                    if reply is None:
                        # The child may still answer later: the numbers keep that late answer from being taken for
                        # the next request's.
                        raise IndexProcessError(
                            f"index process {process.pid} did not answer {request[0]!r} within {timeout:.0f} s (it"
                            " may still be indexing the log after a restart); try again"
                        )
                except (EOFError, OSError) as exc:
                    if attempt == 2:
                        raise IndexProcessError(f"index process: {request[0]!r} failed: {exc}") from None
                    try:
                        process.wait(1)  # it died mid-request: the next attempt starts another
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait()
                    continue
                if reply[0] == "error":
                    raise IndexProcessError(f"index process: {request[0]!r} failed: {reply[1]}")
                return reply
        raise AssertionError("unreachable")

    def _release(self) -> None:
        """Unmap and close the shared position (once)."""
        if not self._target.closed:
            self._target.close()
            os.close(self._target_fd)

    @staticmethod
    def _answer(conn: Connection, number: int, deadline: float) -> tuple[Any, ...] | None:
        """The answer to request `number` (without its number), skipping late answers to earlier ones; None at
        the deadline."""
        while conn.poll(max(0.0, deadline - time.monotonic())):
            reply: tuple[Any, ...] = conn.recv()
            if reply[0] == number:
                return reply[1:]
        return None
