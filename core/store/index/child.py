"""The index process's own side (`python -m core.store.index.child`, started by core.store.index.process, whose
docstring tells the protocol): its main loop, which has core.store.index.builder read the records below the store's
dispatched position from the commit log and index them, and answer the store's requests."""

from __future__ import annotations

import fcntl
import json
import logging
import mmap
import os
import signal
import sys
from multiprocessing.connection import Connection

from core.store.index.builder import IndexBuilder
from core.store.index.process import CHUNK_RECORDS, IDLE_POLL_S, LOG_FORMAT, TARGET

log = logging.getLogger(__name__)

# Added to the process's nice value (a lower scheduling priority than the store's process).
NICENESS = 5


def serve_index(
    index_dir: str,
    slots: int,
    max_entries: int,
    commit_log_dir: str,
    segment_size: int,
    floor: int,
    conn: Connection,
    target: mmap.mmap,
    log_level: int,
) -> None:
    """The child's main loop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    # The index only serves queries, which wait for it: when both cores are busy, the process that takes and hands
    # out messages goes first.
    os.nice(NICENESS)
    logging.basicConfig(level=log_level, stream=sys.stderr, format=LOG_FORMAT)
    try:
        builder = IndexBuilder(index_dir, slots, max_entries, commit_log_dir, segment_size, floor)
    except Exception as exc:
        log.exception("index process for %s failed to start", index_dir)
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", builder.position))
    while True:
        limit = TARGET.unpack_from(target, 0)[0]
        busy = builder.position < limit
        if busy:
            builder.index_until(limit, CHUNK_RECORDS)
        try:
            if not conn.poll(0 if busy else IDLE_POLL_S):
                continue
            request = conn.recv()
        except (EOFError, OSError):
            log.info("index process: the store's process is gone; exiting")
            builder.index.close()
            return
        number, request = request[0], request[1:]  # the number goes back with the answer
        if request[0] == "stop":
            conn.send((number, "stopped", builder.stop(request[1])))
            return
        try:
            reply = builder.answer(request)
        except Exception as exc:
            log.exception("index process: %r failed", request[0])
            reply = ("error", f"{type(exc).__name__}: {exc}")
        conn.send((number, *reply))


def main() -> None:
    (
        index_dir,
        slots,
        max_entries,
        commit_log_dir,
        segment_size,
        floor,
        conn_fd,
        target_fd,
        lock_fd,
        log_level,
    ) = json.loads(sys.argv[1])
    # The index directory's lock, taken by the store's process before it started this one and inherited: held until
    # this process ends (core.store.index.process.wait_for_orphan). Taking it again on the same open file changes
    # nothing; it fails only if the descriptor is not the lock.
    fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    target = mmap.mmap(target_fd, TARGET.size)
    serve_index(
        index_dir, slots, max_entries, commit_log_dir, segment_size, floor, Connection(conn_fd), target, log_level
    )


if __name__ == "__main__":
    main()
