"""The message store, after RocketMQ's store: one class per on-disk structure, the commit log the truth and
everything else rebuilt from it. It knows nothing above it (core.store imports nothing else of core).

    message_store.py   the facade (DefaultMessageStore): open and recover, append, read, query, close
    config.py          StoreConfig, the one settings object, passed to the parts that need it
    errors.py          StoreError and its kinds
    message.py, stored_message.py, message_id.py, put_result.py, topic_name.py
                       what goes in and comes out: messages taken and read back, their ids, what an append
                       answers, valid names
    recovery.py, checkpoint.py, retention.py, service_thread.py
                       keeping the store: open after a crash, positions known on disk, old files deleted and the
                       disk watched, the background threads (the facade's own, beside it)
    log/               the commit log and the append path: a record's bytes, the write ring, segments, flush
    queues/            the consume queues and the dispatcher that follows the log to build them
    index/             the index files of message keys, built in a process of their own
    ha/                replication: a master's log copied to its slaves over the HA link

An append: message_store.py -> log/ (appender -> write_ring -> commit_log -> flush_service when SYNC_FLUSH);
then queues/dispatcher.py -> queues/consume_queue.py, and index/ (the index process) from the log. A read:
queues/reader.py -> queues/consume_queue.py -> log/commit_log.py -> log/record_codec.py -> stored_message.py.
"""
