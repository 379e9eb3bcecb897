"""Settings of the message store: one frozen dataclass, passed to the parts that need it.

Defaults follow Apache RocketMQ's `MessageStoreConfig` where the two designs meet; each limit says why.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path

from core.store.ha.config import HAConfig

MiB = 1024 * 1024
GiB = 1024 * MiB


class FlushMode(enum.Enum):
    # ASYNC_FLUSH acknowledges once the record is in the page cache; a background flush makes it durable
    # every `flush_interval_ms`. SYNC_FLUSH acknowledges only after fdatasync, with group commit.
    ASYNC_FLUSH = "ASYNC_FLUSH"
    SYNC_FLUSH = "SYNC_FLUSH"


class BrokerRole(enum.Enum):
    # RocketMQ's BrokerRole. A master takes writes; ASYNC_MASTER acknowledges without waiting for a slave,
    # SYNC_MASTER only once a slave holds the record. A SLAVE copies its master's log (core.store.ha) and refuses
    # writes of its own.
    ASYNC_MASTER = "ASYNC_MASTER"
    SYNC_MASTER = "SYNC_MASTER"
    SLAVE = "SLAVE"


# RocketMQ's mapedFileSizeCommitLog: large segments keep the number of open mappings small.
DEFAULT_SEGMENT_SIZE = 1 * GiB
# Segments below this cannot hold a maximum-size message plus its header; tests go down to a few MiB.
MIN_SEGMENT_SIZE = 64 * 1024
# RocketMQ's maxMessageSize (4 MiB); Kafka's message.max.bytes is 1 MiB.
DEFAULT_MAX_MESSAGE_SIZE = 4 * MiB
# RocketMQ's mapedFileSizeConsumeQueue: 300,000 entries of 20 bytes (6 MB per file).
DEFAULT_CQ_ENTRIES_PER_FILE = 300_000
# RocketMQ's maxHashSlotNum / maxIndexNum: 5 M slots, 20 M entries (about 420 MB per index file).
# Light queues (one per MQTT subscription filter, say) are many and mostly short: 10,000 entries (200 KB) per
# file rather than 6 MB, so that thousands of them cost megabytes, not gigabytes.
DEFAULT_LIGHT_CQ_ENTRIES_PER_FILE = 10_000
# The write ring appends land in before the commit log's segments (core.store.log.write_ring): 32 MiB covers tens of
# milliseconds of appends at the rates measured here while the dispatcher commits every millisecond; its pages
# stay in memory. It must hold the largest record with room to spare (WRITE_RING_SLACK).
DEFAULT_WRITE_RING_SIZE = 32 * MiB
WRITE_RING_SLACK = 64 * 1024
DEFAULT_INDEX_SLOTS = 5_000_000
DEFAULT_INDEX_ENTRIES = 20_000_000


@dataclass(slots=True, frozen=True)
class StoreConfig:
    store_dir: Path
    flush_mode: FlushMode = FlushMode.ASYNC_FLUSH
    segment_size: int = DEFAULT_SEGMENT_SIZE
    max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE
    write_ring_size: int = DEFAULT_WRITE_RING_SIZE
    # RocketMQ's flushIntervalCommitLog (500 ms) and syncFlushTimeout (5 s).
    flush_interval_ms: int = 500
    # ASYNC_FLUSH also flushes as soon as this many bytes of the log wait for the disk (0: only every interval), so
    # that a burst of writes is not all at risk, nor all written at once, until the interval ends: at 100 MB/s the
    # interval alone leaves 50 MB unflushed.
    flush_after_bytes: int = 4 * MiB
    sync_flush_timeout_ms: int = 5000
    # SYNC_FLUSH keeps this much of the log past the write position written with zeros and on disk (0: off), as
    # RocketMQ's warmMapedFileEnable warms a segment: a group's fdatasync into blocks the file system has not yet
    # allocated also commits their allocation to its journal, which took 16 KiB groups from about 140 to 220 us.
    sync_warm_bytes: int = 8 * MiB
    # Consume queues and index files are flushed (and the checkpoint written) this often:
    # RocketMQ's flushIntervalConsumeQueue is 1 s.
    logic_flush_interval_ms: int = 1000
    # A consume queue with fewer unflushed pages than this waits for the next thorough flush (RocketMQ's
    # flushConsumeQueueLeastPages, 2): thousands of light queues with an entry or two each would otherwise cost an
    # fdatasync apiece every second. The checkpoint vouches only for what the last thorough flush wrote, so after
    # a crash recovery re-dispatches at most this interval's records (RocketMQ's thorough interval is 60 s).
    logic_flush_least_pages: int = 2
    logic_flush_thorough_interval_ms: int = 10_000
    cq_entries_per_file: int = DEFAULT_CQ_ENTRIES_PER_FILE
    light_cq_entries_per_file: int = DEFAULT_LIGHT_CQ_ENTRIES_PER_FILE
    index_slots: int = DEFAULT_INDEX_SLOTS
    index_entries: int = DEFAULT_INDEX_ENTRIES
    # Build the index in a process of its own (core.store.index.process) once the store is open: a quarter of an
    # append's cost moves to another core. Off for a store embedded in a program; `mqgate serve` turns it on.
    index_process: bool = False
    # Retention, as RocketMQ's fileReservedTime (hours) and deleteWhen ("04", or "04;05" for several hours).
    file_reserved_hours: float = 72.0
    delete_when: str = "04"
    # Disk usage of the store's file system: clean early, warn, refuse writes (RocketMQ: 0.75 / 0.85 / 0.90).
    disk_clean_ratio: float = 0.75
    disk_warn_ratio: float = 0.85
    disk_refuse_ratio: float = 0.90
    retention_check_interval_s: float = 10.0
    # Written into every record and into offset message ids.
    store_host: str = "127.0.0.1"
    store_port: int = 10911
    # A read whose messages lie further behind the log's end than this percentage of the machine's memory (so no
    # longer in the page cache, RocketMQ's accessMessageInMemoryMaxRatio) is one a master suggests a slave serve.
    access_message_in_memory_max_ratio: int = 40
    # Replication (core.store.ha): the broker's role (RocketMQ's brokerRole) and the HA link's settings.
    role: BrokerRole = BrokerRole.ASYNC_MASTER
    ha: HAConfig = field(default_factory=HAConfig)

    def __post_init__(self) -> None:
        object.__setattr__(self, "store_dir", Path(self.store_dir))
        if self.segment_size < MIN_SEGMENT_SIZE:
            raise ValueError(f"segment_size {self.segment_size}: must be at least {MIN_SEGMENT_SIZE} bytes")
        if self.max_message_size + 1024 > self.segment_size:
            raise ValueError(
                f"max_message_size {self.max_message_size} does not fit in a segment of {self.segment_size}"
                " bytes; raise segment_size or lower max_message_size"
            )
        if self.flush_after_bytes < 0:
            raise ValueError(f"flush_after_bytes {self.flush_after_bytes}: must be 0 (off) or more")
        if self.sync_warm_bytes < 0:
            raise ValueError(f"sync_warm_bytes {self.sync_warm_bytes}: must be 0 (off) or more")
        if self.write_ring_size < self.max_message_size + 4096 + WRITE_RING_SLACK:
            raise ValueError(
                f"write_ring_size {self.write_ring_size} cannot hold a record of max_message_size"
                f" {self.max_message_size} (it needs max_message_size + {4096 + WRITE_RING_SLACK} bytes at least);"
                " raise write_ring_size or lower max_message_size"
            )
        if not 0 < self.disk_clean_ratio <= self.disk_warn_ratio <= self.disk_refuse_ratio <= 1:
            raise ValueError("disk ratios must satisfy 0 < clean <= warn <= refuse <= 1")
        if (
            min(self.cq_entries_per_file, self.light_cq_entries_per_file, self.index_slots) < 1
            or self.index_entries < 2
        ):
            raise ValueError(
                "cq_entries_per_file, light_cq_entries_per_file, index_slots and index_entries must be positive"
            )
        if self.logic_flush_least_pages < 0 or self.logic_flush_thorough_interval_ms < self.logic_flush_interval_ms:
            raise ValueError(
                "logic_flush_least_pages must be at least 0 and logic_flush_thorough_interval_ms at least "
                "logic_flush_interval_ms"
            )
        if not 0 <= self.access_message_in_memory_max_ratio <= 100:
            raise ValueError(
                f"access_message_in_memory_max_ratio {self.access_message_in_memory_max_ratio}: a percentage, 0 to 100"
            )
        if self.role is BrokerRole.SYNC_MASTER and self.ha.listen_port is None:
            raise ValueError("a SYNC_MASTER waits for a slave: give it an HA port (ha.listen_port) to connect to")
        for hour in self.delete_hours:
            if not 0 <= hour <= 23:
                raise ValueError(f"delete_when {self.delete_when!r}: hours go from 00 to 23")

    @property
    def delete_hours(self) -> frozenset[int]:
        try:
            return frozenset(int(part) for part in self.delete_when.split(";") if part.strip())
        except ValueError:
            raise ValueError(
                f"delete_when {self.delete_when!r}: expected hours of the day separated by ';', e.g. '04;05'"
            ) from None

    @property
    def commit_log_dir(self) -> Path:
        return self.store_dir / "commitlog"

    @property
    def consume_queue_dir(self) -> Path:
        return self.store_dir / "consumequeue"

    @property
    def index_dir(self) -> Path:
        return self.store_dir / "index"
