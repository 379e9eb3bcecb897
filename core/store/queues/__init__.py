"""The consume queues (RocketMQ's queue package and ReputMessageService): fixed-size entries per (topic, queue id)
pointing into the commit log, built by following the log.

    dispatcher.py           follows the commit log: writes each record's consume-queue entries (and its index
                            entries, when the index is built in this process); a message is visible from here
    consume_queue.py        one queue's 20-byte entries
    consume_queue_table.py  all queues of a store, by (topic, queue id), light queues included
    reader.py               reading a queue's messages: its entries, then the log (GetStatus, GetResult)

A record: core.store.log -> dispatcher.py -> consume_queue.py; a read: reader.py -> consume_queue.py -> the log.
"""
