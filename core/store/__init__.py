"""The message store, after RocketMQ's store: one class per on-disk structure, the commit log the truth and
everything else rebuilt from it. It knows nothing above it (core.store imports nothing else of core).

    message_store.py     the facade (DefaultMessageStore): open and recover, append, read, query, close
    config.py, errors.py StoreConfig; StoreError and its kinds
    The log:      record_codec.py, property_codec.py, checksum.py (the record's bytes), appender.py (the append
                  path), write_ring.py (where records land first), commit_log.py, mapped_file.py (segments),
                  flush_service.py (durability, group commit), put_result.py, message_id.py
    The queues:   dispatcher.py (follows the log), consume_queue.py, consume_queue_table.py, queue_reader.py
    The index:    index_file.py, index_service.py, index_process.py and index_child.py (a process of its own),
                  index_builder.py
    Open, keep:   recovery.py, log_scan.py, checkpoint.py, retention.py, service_thread.py
    Names:        message.py and stored_message.py (messages in and out), topic_name.py

An append: appender.py -> write_ring.py -> commit_log.py (mapped_file.py) -> flush_service.py when SYNC_FLUSH;
then dispatcher.py -> consume_queue.py and the index process. A read: queue_reader.py -> consume_queue.py ->
commit_log.py -> record_codec.py -> stored_message.py.
"""
