"""The master's side of replication (RocketMQ's HAService, AcceptSocketService and HAConnection): it listens on the
HA port, and for each slave that connects a reader thread takes its reports and a writer thread sends it the log.

The writer starts where the slave's first report says its log ends (from the start of the master's last segment for
a slave that reports 0), then sends what the log holds past that, at most `transfer_batch_size` bytes a frame and
never across a segment, as soon as the dispatcher has committed it (`data_appended`, a dispatch listener), and a
heartbeat frame when it has sent nothing for `heartbeat_interval_s`. A slave whose log reaches past the master's, or
that asks for bytes retention has deleted, is refused: its link is closed with the reason logged. A slave silent for
`housekeeping_interval_s` is dropped.

Each report is the slave's acknowledgement: SYNC_MASTER writers wait (`replicated`) until some slave has reported
past their record, through the same waiters the flush uses (FlushWaiters: one future per group of writers). Under
automatic failover (HAConfig.controlled) each slave names itself in a hello, and writers wait until every slave of
the SyncStateSet (`set_in_sync`) has reported past their record: what is acknowledged is on every broker that may
be elected next.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time

from core.store.ha.config import HAConfig
from core.store.ha.frames import HAProtocolError, ReportReader, encode_header
from core.store.ha.states import SlaveState
from core.store.log.commit_log import CommitLog
from core.store.log.flush_service import FlushWaiters
from core.store.service_thread import ServiceThread

log = logging.getLogger(__name__)

ACCEPT_POLL_S = 0.5
WRITER_IDLE_WAIT_S = 0.1


class HAMaster(ServiceThread):
    def __init__(self, commit_log: CommitLog, host: str, port: int, settings: HAConfig) -> None:
        super().__init__("mqgate-ha-accept")
        self.commit_log = commit_log
        self.settings = settings
        self.waiters = FlushWaiters(settings.slave_timeout_s)
        self.links: list[SlaveLink] = []
        self._links_lock = threading.Lock()
        # Under automatic failover: the broker ids of the slaves in the SyncStateSet (the master is in it too).
        self.in_sync: frozenset[int] = frozenset()
        self._server = socket.create_server((host, port), reuse_port=False)
        self._server.settimeout(ACCEPT_POLL_S)
        self.address: tuple[str, int] = self._server.getsockname()[:2]

    # --- what the store asks ---

    def slave_ok(self, end_offset: int) -> bool:
        """Whether a SYNC_MASTER writer may wait for a slave: one is connected, and not more than
        max_gap_not_in_sync behind `end_offset` (else SLAVE_NOT_AVAILABLE at once, as RocketMQ's isSlaveOK). Under
        automatic failover: the SyncStateSet counts min_in_sync_replicas brokers or more."""
        if self.settings.controlled:
            return len(self.in_sync) + 1 >= self.settings.min_in_sync_replicas
        best = self.best_acked()
        return best >= 0 and end_offset - best < self.settings.max_gap_not_in_sync

    def replicated(self, end_offset: int) -> asyncio.Future[bool]:
        """A future that gets True once a slave holds the log up to `end_offset`, False after slave_timeout."""
        future = self.waiters.add_async(end_offset)
        self.data_appended()
        return future

    def replicated_blocking(self, end_offset: int) -> bool:
        self.data_appended()
        return self.waiters.wait_blocking(end_offset)

    def set_in_sync(self, broker_ids: frozenset[int]) -> None:
        """The slaves of the SyncStateSet from now on (under automatic failover), as the controller holds it."""
        self.in_sync = frozenset(broker_ids)
        self.waiters.release(self.confirmed())

    def confirmed(self) -> int:
        """How far the log is held by every broker a writer waits for: the furthest any slave reaches, or, under
        automatic failover, the least of the SyncStateSet's slaves (the log's end when the master is alone in it;
        -1 while a member is not connected)."""
        if not self.settings.controlled:
            return self.best_acked()
        members = self.in_sync
        if not members:
            return self.commit_log.write_pos
        with self._links_lock:
            acked: dict[int, int] = {}
            for link in self.links:
                if link.broker_id in members:
                    acked[link.broker_id] = max(acked.get(link.broker_id, -1), link.acked)
        return min(acked.values()) if len(acked) == len(members) else -1

    def best_acked(self) -> int:
        """The furthest any connected slave's log reaches (-1 with none connected)."""
        with self._links_lock:
            return max((link.acked for link in self.links if link.acked >= 0), default=-1)

    def data_appended(self, _touched: object = None) -> None:
        """The log grew: wake the writers (a dispatch listener, after each round has committed the records)."""
        for link in self.links:
            if link.sleeping:
                link.wake_sleeping()

    def slaves(self) -> list[SlaveState]:
        end = self.commit_log.write_pos
        now_ms = time.time() * 1000
        states = []
        with self._links_lock:
            links = list(self.links)
        for link in links:
            if link.acked < 0:
                continue
            lag = max(end - link.acked, 0)
            stamp = self.commit_log.store_timestamp_at(link.acked) if lag else None
            lag_s = max(now_ms - stamp, 0) / 1000 if stamp else 0.0
            in_sync = lag < self.settings.max_gap_not_in_sync
            states.append(SlaveState(link.peer, link.acked, lag, lag_s, in_sync, link.broker_id))
        return states

    # --- the accept thread ---

    def run(self) -> None:
        while not self.stopped:
            try:
                connection, peer = self._server.accept()
            except TimeoutError:
                continue
            except OSError as exc:
                if not self.stopped:
                    log.error("HA port %s:%d: accept failed: %s", *self.address, exc)
                    time.sleep(ACCEPT_POLL_S)
                continue
            link = SlaveLink(self, connection, f"{peer[0]}:{peer[1]}")
            with self._links_lock:
                self.links.append(link)
            log.info("HA: slave %s connected", link.peer)
            link.start()

    def link_closed(self, link: SlaveLink, reason: str) -> None:
        with self._links_lock:
            if link not in self.links:
                return
            self.links.remove(link)
        log.info("HA: slave %s disconnected: %s", link.peer, reason)

    def stop(self) -> None:
        super().stop()
        self._server.close()
        with self._links_lock:
            links = list(self.links)
        for link in links:
            link.close("the master stops")
            link.stop()


class SlaveLink(ServiceThread):
    """One slave's connection: this thread writes the log to it; `_read` (a thread of its own) takes its reports."""

    def __init__(self, master: HAMaster, connection: socket.socket, peer: str) -> None:
        super().__init__(f"mqgate-ha-to-{peer}")
        self.master = master
        self.connection = connection
        self.peer = peer
        self.acked = -1  # the slave's last report
        self.requested = -1  # its first report: where it asks the log from
        self.last_read = time.monotonic()
        self._reports = ReportReader(master.settings.controlled)
        self._closed = False
        self._reader = threading.Thread(target=self._read, name=f"mqgate-ha-from-{peer}", daemon=True)
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        connection.settimeout(master.settings.housekeeping_interval_s)

    def start(self) -> None:
        self._reader.start()
        super().start()

    @property
    def broker_id(self) -> int | None:
        """The id the slave named in its hello (under automatic failover), once it has."""
        return self._reports.broker_id

    def close(self, reason: str) -> None:
        if self._closed:
            return
        self._closed = True
        self.stopped = True
        self.wake()
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        self.connection.close()
        self.master.link_closed(self, reason)

    def _read(self) -> None:
        reports = self._reports
        master = self.master
        while not self._closed:
            try:
                data = self.connection.recv(4096)
            except TimeoutError:
                self.close(f"no report for {master.settings.housekeeping_interval_s:g} s")
                return
            except OSError as exc:
                self.close(str(exc))
                return
            if not data:
                self.close("the slave closed the connection")
                return
            self.last_read = time.monotonic()
            try:
                offset = reports.feed(data)
            except HAProtocolError as exc:
                self.close(str(exc))
                return
            if offset is None:
                continue
            if self.requested < 0:
                self.requested = offset
                self.wake()
            self.acked = offset
            master.waiters.release(master.confirmed())

    def run(self) -> None:
        while not self.stopped and self.requested < 0:
            self.wait(WRITER_IDLE_WAIT_S)
        if self.stopped:
            return
        commit_log = self.master.commit_log
        settings = self.master.settings
        position = self._start_position(commit_log)
        if position is None:
            return
        last_write = 0.0
        try:
            while not self.stopped:
                self.master.waiters.flush_starting()  # writers appended before this read are in this transfer
                end = commit_log.commit()
                if position < end:
                    position = self._send(commit_log, position, end, settings.transfer_batch_size)
                    last_write = time.monotonic()
                    continue
                if time.monotonic() - last_write >= settings.heartbeat_interval_s:
                    self.connection.sendall(encode_header(position, 0))
                    last_write = time.monotonic()
                self.sleeping = True
                if commit_log.committed_pos <= position and commit_log.write_pos <= position:
                    self.wait(min(WRITER_IDLE_WAIT_S, settings.heartbeat_interval_s))
                self.sleeping = False
        except OSError as exc:
            self.close(f"sending failed: {exc}")
        except LookupError as exc:
            self.close(str(exc))

    def _start_position(self, commit_log: CommitLog) -> int | None:
        end = commit_log.write_pos
        requested = self.requested
        if requested == 0:
            # A new slave starts with the master's last segment (RocketMQ: maxPhyOffset - maxPhyOffset % segment).
            files = commit_log.files.files
            return files[-1].base if files else commit_log.min_offset
        if requested > end:
            self.close(f"its log reaches {requested}, past this master's end {end}: it is not a copy of this log")
            log.error("HA: slave %s refused: its log reaches %d, past this master's end %d", self.peer, requested, end)
            return None
        if requested < commit_log.min_offset:
            self.close(f"it asks for offset {requested}, but this log now starts at {commit_log.min_offset}")
            log.error("HA: slave %s refused: it asks for offset %d, deleted here (this log starts at %d); start it"
                      " with an empty store", self.peer, requested, commit_log.min_offset)  # fmt: skip
            return None
        return requested

    def _send(self, commit_log: CommitLog, position: int, end: int, batch: int) -> int:
        mapped = commit_log.files.find(position)
        if mapped is None or mapped.closed:
            raise LookupError(f"commit-log offset {position} is no longer in this log (retention deleted it)")
        stop = min(end, mapped.end, position + batch)
        try:
            data = bytes(mapped.view[position - mapped.base : stop - mapped.base])
        except ValueError:  # unmapped by retention meanwhile
            raise LookupError(f"commit-log offset {position} is no longer in this log (retention deleted it)") from None
        self.connection.sendall(encode_header(position, len(data)) + data)
        return stop

    def stop(self) -> None:
        self.close("stopped")
        super().stop()
        self._reader.join(timeout=5)
