"""The Spark sink: a connector (`spark-sink`) writing a topic's messages to a partitioned Parquet table through
PySpark, each message exactly once, whatever is killed when (the task, Spark's JVM, or mqgate with SIGKILL).

Modules: connector.py (config, the task), batch_writer.py (the bounded hand-over to the thread that runs Spark),
table_commit.py (the commit protocol and the table layout on disk), table_schema.py (columns and rows),
json_fields.py (`json.schema`: DDL parser and strict JSON conversion), spark_session.py (the process's one Spark),
table_reader.py (reading the table back with its recorded schema).

How a record travels:
1. The runtime calls `put` on the event loop. Records whose queue offset the task already holds are skipped (so
   a runtime that delivers again, after a restart or a retry, cannot duplicate a row); a body that does not fit
   `json.schema` is reported in `RecordsFailed` (the runtime dead-letters it; the task keeps running); the rest
   become rows and are handed to the writer thread. When `2 x batch.size` rows wait, `put` waits too.
2. The writer thread writes a batch (every waiting row, once `batch.size` rows wait, the oldest has waited
   `batch.interval.ms`, or `commit`/`stop` asks) with one Spark job into `_mqgate/staging/batch-<n>-<token>/` of
   the table (the token is new at every start: the JVM of a just-killed process may still be finishing a job and
   must not write into a live batch), then commits it: the manifest
   `_mqgate/manifest.json`, which names the batch and records every queue's next offset, is replaced atomically
   (tmp file, fsync, rename, fsync of the directory), and then the staged files are renamed into their partition
   directories. table_commit.py documents the layout and the steps.
3. `stored_offsets` answers from the manifest for every queue (0, the earliest message kept, for a queue never
   written), so after any restart the runtime resumes exactly after the last committed batch, whatever offsets
   the core holds. `flush(offsets)` does not wait for Spark (mqgate's runtime flushes after every put, which
   would make every put a Spark job): it queues the runtime's offsets, which pass records it dead-lettered, to
   be committed with the next batch. The core's committed offsets can therefore run up to one batch ahead of the
   table; they are not what this sink resumes from. `stop` commits what was put before it returns.

Why each message lands once: the manifest rename is the single commit point of a batch, and it carries the data
(the file names) and the offsets together. A crash before it leaves only staged files, deleted when the table is
opened again, and old offsets, so the batch's records are delivered and written again. A crash after it leaves a
committed batch whose files are moved into place when the table is opened (a file is either still in staging or
already moved; each move is one rename), and offsets past the batch, so its records are not delivered again.
Killing Spark alone fails the running job: the task fails (a failed write is retried only while the JVM lives)
and, restarted (`mqgate connect restart`, or mqgate's next start), gets a new JVM and resumes from the manifest,
which is the same as a crash before the commit point. Renames are atomic only on one POSIX file
system: `path` must be local, or a shared file system every executor and the driver see (not S3 or HDFS).

Limits: one task per connector (one writer per table; a lock file refuses a second); a reader listing the table
while a batch is being moved in, or after a crash in the middle of the moves and before the sink restarts, sees
part of that newest batch (never a duplicate, never an uncommitted row); the table's columns are fixed when its
first batch is committed (another `json.schema` or `partition.columns` needs a new path); one Spark master per
mqgate process.

After the writer failed (Spark gone, disk full), `put` takes records without keeping them and `flush` raises,
which fails the task: raising from `put` would have the runtime (with `errors.tolerance=all`) dead-letter good
records one by one. The manifest did not move, so the restarted task is given them again.
"""
