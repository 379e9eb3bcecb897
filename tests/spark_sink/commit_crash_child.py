"""Run by test_crash.py in a child process: open a table, commit batches of stand-in data files, and SIGKILL
this process at the N-th rename (argv: table root, N, batches to commit). Spark is not needed to test the
commit protocol: each stand-in file holds the JSON list of the (queue, offset) pairs its rows would be."""

import json
import os
import signal
import sys
from pathlib import Path

from connectors.api import QueueRef
from spark_sink.table_commit import TableCommitter

QUEUES = (QueueRef("a", 0), QueueRef("a", 1), QueueRef("b", 0))
PER_QUEUE = 5  # records per queue and batch


def main() -> None:
    root, kill_at, batches = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    renames = 0

    def counted(real):  # type: ignore[no-untyped-def]
        def rename(*args, **kwargs):  # type: ignore[no-untyped-def]
            nonlocal renames
            renames += 1
            if renames == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)

        return rename

    os.rename = counted(os.rename)
    os.replace = counted(os.replace)
    table = TableCommitter(root)
    table.open()
    for _ in range(batches):
        offsets = table.offsets()
        batch = table.next_batch()
        staging = table.staging_dir(batch)
        next_offsets = {}
        for queue in QUEUES:
            start = offsets.get(queue, 0)
            rows = [[queue.topic, queue.queue_id, offset] for offset in range(start, start + PER_QUEUE)]
            # Two files per queue, as Spark writes one per task and partition.
            for part, half in enumerate((rows[:2], rows[2:])):
                directory = staging / f"topic={queue.topic}" / f"dt=2026-11-{22 + queue.queue_id}"
                directory.mkdir(parents=True, exist_ok=True)
                (directory / f"part-{part}-q{queue.queue_id}.parquet").write_text(json.dumps(half))
            (staging / "_SUCCESS").write_text("")
            next_offsets[queue] = start + PER_QUEUE
        table.commit(batch, next_offsets)
    table.close()
    print(f"renames={renames}")


main()
