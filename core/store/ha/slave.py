"""The slave's side of replication (RocketMQ's HAClient): one thread connects to the master's HA port, reports how
far this log reaches, and appends what the master sends; the dispatcher then builds the consume queues and the
index from the copied records, as from the master's own appends (the log is the truth).

Reports go out on connecting, after each append and every `heartbeat_interval_s`; the first asks for the log's last
OVERLAP_BYTES again, which must be the same bytes as this log's. What does not continue this log is refused
(core.store.ha.continuation): the link is closed, nothing of it kept, the reason logged and kept in
`refused`, and the next try waits RECONNECT_WAIT_S. A master silent for `housekeeping_interval_s` (it sends a
heartbeat every 5 s) is taken for gone, and so is one whose connection closes. The master's address comes from the
NameServer's reply to this broker's registration, or from `[ha] master_address` (`set_master`).
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable

from core.store.ha.config import HAConfig
from core.store.ha.continuation import OVERLAP_BYTES, LogContinuation, ReplicationRefused
from core.store.ha.frames import FrameReader, HAProtocolError, encode_hello, encode_report
from core.store.ha.states import MasterState
from core.store.log.commit_log import CommitLog
from core.store.log.replay import read_bytes
from core.store.service_thread import ServiceThread

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 3.0
# RocketMQ's HAClient waits 5 s before connecting again.
RECONNECT_WAIT_S = 5.0
RECEIVE_BYTES = 256 * 1024
# The largest frame accepted: a master sends ha_transfer_batch_size (32 KiB) at a time; this bounds what a
# broken or hostile peer can make the slave buffer.
MAX_FRAME_SIZE = 64 * 1024 * 1024


class HASlave(ServiceThread):
    def __init__(
        self,
        commit_log: CommitLog,
        wake_dispatcher: Callable[[], None],
        max_record_size: int,
        settings: HAConfig,
        master_address: str | None = None,
    ) -> None:
        super().__init__("mqgate-ha-slave")
        self.commit_log = commit_log
        self.wake_dispatcher = wake_dispatcher
        self.max_record_size = max_record_size
        self.settings = settings
        self.master_address = master_address or None
        self.refused: str | None = None
        self.connected = False
        self.appended_bytes = 0
        self._last_heard = 0.0
        self._socket: socket.socket | None = None
        self._lock = threading.Lock()

    def set_master(self, address: str | None) -> None:
        """Follow the master at `address` (host:port of its HA port); a change drops the current link."""
        address = address or None
        if address == self.master_address:
            return
        log.info("HA: master address %s (was %s)", address, self.master_address)
        self.master_address = address
        self._drop()
        self.wake()

    def master_alive(self) -> bool:
        """Connected, and the master heard within the housekeeping interval."""
        return self.connected and time.monotonic() - self._last_heard < self.settings.housekeeping_interval_s

    def state(self) -> MasterState:
        heard = time.monotonic() - self._last_heard if self._last_heard else None
        with self._lock:
            connection = self._socket
        local = None
        if connection is not None and self.connected:
            with contextlib.suppress(OSError):
                host, port = connection.getsockname()[:2]
                local = f"{host}:{port}"
        return MasterState(self.master_address, self.connected, heard, self.refused, local)

    def run(self) -> None:
        while not self.stopped:
            address = self.master_address
            if address is None:
                self.wait(1.0)
                continue
            try:
                self._follow(address)
            except ReplicationRefused as exc:
                self.refused = str(exc)
                log.error("HA: data from master %s refused: %s", address, exc)
            except (OSError, HAProtocolError) as exc:
                if not self.stopped:
                    log.warning("HA: link to master %s: %s", address, exc)
            finally:
                self._drop()
            if not self.stopped:
                self.wait(RECONNECT_WAIT_S)

    def _follow(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        connection = socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S)
        with self._lock:
            self._socket = connection
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        settings = self.settings
        commit_log = self.commit_log
        empty = not commit_log.files.files and commit_log.write_pos == 0
        end = commit_log.write_pos
        tail = read_bytes(commit_log, max(end - OVERLAP_BYTES, commit_log.min_offset), end) if not empty else b""
        continuation = LogContinuation(end, empty, commit_log.segment_size, self.max_record_size, tail)
        frames = FrameReader(MAX_FRAME_SIZE)
        hello = encode_hello(settings.broker_id) if settings.controlled else b""
        connection.sendall(hello + encode_report(continuation.start))
        reported = end
        last_report = time.monotonic()
        self.connected = True
        self._last_heard = time.monotonic()
        log.info("HA: following master %s from commit-log offset %d", address, reported)
        connection.settimeout(min(settings.heartbeat_interval_s, 1.0))
        while not self.stopped and self.master_address == address:
            try:
                data = connection.recv(RECEIVE_BYTES)
            except TimeoutError:
                data = None
            now = time.monotonic()
            if data is not None:
                if not data:
                    raise OSError("the master closed the connection")
                self._last_heard = now
                for offset, chunk in frames.feed(data):
                    for piece in continuation.accept(offset, chunk):
                        if commit_log.write_pos == 0 and not commit_log.files.files and piece.pos:
                            commit_log.start_at(piece.pos)
                        commit_log.append_replicated(piece.pos, piece.data, piece.messages, piece.filler)
                        self.appended_bytes += len(piece.data)
                self.refused = None
            elif now - self._last_heard >= settings.housekeeping_interval_s:
                raise OSError(f"nothing from the master for {settings.housekeeping_interval_s:g} s")
            end = commit_log.write_pos
            if end > reported:
                self.wake_dispatcher()
            if end > reported or now - last_report >= settings.heartbeat_interval_s:
                connection.sendall(encode_report(end))
                reported = end
                last_report = now

    def _drop(self) -> None:
        with self._lock:
            connection, self._socket = self._socket, None
        self.connected = False
        if connection is not None:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()

    def stop(self) -> None:
        self.stopped = True
        self._drop()
        super().stop()
