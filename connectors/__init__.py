"""The connector runtime (after RocketMQ Connect and Kafka Connect): source and sink connectors, split into tasks,
run inside `mqgate serve` as a worker: alone, or on a cluster one of every node's (cluster.py, as Kafka Connect's
distributed mode).

Design (the parts and why they lose nothing):

- api.py: what a plugin implements. A connector declares its configuration (`ConfigDef`), validates a config and
  splits it into task configs; a `SourceTask` polls an external system and returns `SourceRecord`s, each with
  the source partition and position it comes from; a `SinkTask` is given `SinkRecord`s and writes them out.
- Sink offsets: a sink task reads its topic as the consumer group `connect-<name>`. The runtime commits a queue's
  offset only after the task's `flush` returned, so a crash delivers again what was not confirmed (at least
  once). A sink that can make its writes idempotent stores the offsets it wrote together with the data, in one
  atomic step, and returns them from `SinkTask.stored_offsets`; the runtime resumes there, whatever the core
  says, so nothing is written twice (exactly once: the file sink and the Spark sink do this).
- Source positions: a record carries its source partition and position in its properties (`CONNECT_TASK`,
  `CONNECT_PARTITION`, `CONNECT_POSITION`), and all records of one source partition go to one queue, in order.
  Positions are committed, with the queue offset they cover, to a keyed table in the core; after a crash the
  runtime reads the partition's queue from that offset to its end and takes the last position the records carry.
  The record and its position are stored in one append, so a source neither loses nor repeats a record.
- Errors: per connector `errors.tolerance` (none: the task fails and stops; all: the record is retried with
  backoff for `errors.retry.timeout` ms, then sent to `errors.deadletterqueue.topic.name` with the error in its
  properties, and the task carries on).
- Plugins are found through the entry-point group `mqgate.connectors` (built in: file source and sink, HTTP sink,
  Spark sink), so a third party adds one with `pip install`.
- Other groups' queues: a sink runner may read queues of other broker groups of a cluster (remote_reader.py, over
  remoting, its offsets committed on each queue's group); EventBridge's targets read their queue on every group so.
  Queues are named with their group (api.QueueRef.broker) in what a sink stores.
- On a cluster (cluster.py): configs shared by every node, each task on one node, moving when nodes come and go.
"""
