"""Retention (RocketMQ's CleanCommitLogService): delete old segments, watch disk usage, refuse writes when full.

* At the hours in `delete_when`, segments last written more than `file_reserved_hours` ago are deleted.
* When the file system is `disk_clean_ratio` full or more, the oldest segments are deleted at once, expired or
  not (RocketMQ's cleanImmediately), until usage falls below the ratio. The segment being written is never
  deleted. Unconsumed messages can go this way: the disk is the hard limit.
* At `disk_warn_ratio` a warning is logged; at `disk_refuse_ratio` appends are refused with an error until
  usage falls.
Consume queues and index files whose entries all point below the new log start go with the segments.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from core.store.config import StoreConfig
from core.store.log.commit_log import CommitLog
from core.store.log.write_ring import WRITE_RING_FILE
from core.store.queues.consume_queue_table import ConsumeQueueTable
from core.store.service_thread import ServiceThread

log = logging.getLogger(__name__)


class IndexFiles(Protocol):
    """What retention asks of the index: core.store.index.service.IndexService, or core.store.index.process's
    IndexProcess when a child builds it."""

    def delete_below(self, min_commit_log_offset: int) -> int: ...


# At most this many segments per run when cleaning by age, so a long-stopped store does not stall
# (RocketMQ's DELETE_FILES_BATCH_MAX is 10).
MAX_SEGMENTS_PER_RUN = 10


def disk_usage_ratio(path: Path) -> float:
    usage = shutil.disk_usage(path)
    return usage.used / usage.total if usage.total else 0.0


class RetentionService(ServiceThread):
    def __init__(
        self,
        config: StoreConfig,
        commit_log: CommitLog,
        queues: ConsumeQueueTable,
        index: IndexFiles,
        set_refusal: Callable[[str | None], None],
    ) -> None:
        super().__init__("mqgate-retention")
        self.config = config
        self.commit_log = commit_log
        self.queues = queues
        self.index = index
        self.set_refusal = set_refusal
        self._lock = threading.Lock()

    def run(self) -> None:
        while not self.stopped:
            self.wait(self.config.retention_check_interval_s)
            if self.stopped:
                return
            try:
                self.run_once()
            except Exception:
                log.exception("retention run failed")

    def check_disk(self) -> float:
        usage = disk_usage_ratio(self.config.store_dir)
        config = self.config
        if usage >= config.disk_refuse_ratio:
            self.set_refusal(
                f"disk usage of {config.store_dir} is {usage:.0%}, at or above disk_refuse_ratio"
                f" {config.disk_refuse_ratio:.0%}: writes are refused until retention or an operator frees space"
            )
        else:
            self.set_refusal(None)
        if usage >= config.disk_warn_ratio:
            log.warning(
                "disk usage of %s is %.0f%% (warn at %.0f%%)",
                config.store_dir,
                usage * 100,
                config.disk_warn_ratio * 100,
            )
        return usage

    def run_once(self, now: float | None = None, manual: bool = False) -> int:
        """One retention pass; `manual` deletes expired segments whatever the hour. Returns segments deleted."""
        with self._lock:
            now = time.time() if now is None else now
            usage = self.check_disk()
            due = manual or time.localtime(now).tm_hour in self.config.delete_hours
            deleted = 0
            if due or usage >= self.config.disk_clean_ratio:
                expire_before = now - self.config.file_reserved_hours * 3600
                for mapped, mtime in self.commit_log.segment_ages():
                    if deleted >= MAX_SEGMENTS_PER_RUN and usage < self.config.disk_clean_ratio:
                        break
                    if mtime < expire_before and due:
                        reason = "expired"
                    elif usage >= self.config.disk_clean_ratio:
                        reason = f"disk usage {usage:.0%} >= disk_clean_ratio {self.config.disk_clean_ratio:.0%}"
                    else:
                        break
                    self.commit_log.delete_first_segment()
                    log.info("deleted commit-log segment %s (%s)", mapped.path.name, reason)
                    deleted += 1
                    usage = disk_usage_ratio(self.config.store_dir)
            if deleted:
                self.trim_logic_files()
                self.check_disk()
            return deleted

    def trim_logic_files(self) -> None:
        minimum = self.commit_log.min_offset
        for queue in self.queues.all():
            queue.delete_below_physical(minimum)
        self.index.delete_below(minimum)


def disk_usage_by_part(config: StoreConfig) -> dict[str, int]:
    """MessageStore.disk_usage: the allocated bytes of each part of the store (a stat per file)."""
    usage = {}
    for part, directory in (
        ("commitlog", config.commit_log_dir),
        ("consumequeue", config.consume_queue_dir),
        ("index", config.index_dir),
    ):
        total = 0
        for root, _, files in os.walk(directory):
            for name in files:
                with contextlib.suppress(FileNotFoundError):  # deleted by retention meanwhile
                    total += os.stat(os.path.join(root, name)).st_blocks * 512
        usage[part] = total
    try:
        usage["write_ring"] = os.stat(config.store_dir / WRITE_RING_FILE).st_blocks * 512
    except FileNotFoundError:
        usage["write_ring"] = 0
    return usage
