"""The commit log (RocketMQ's CommitLog and its logfile package): one append-only log of records for all topics.

    appender.py        the append path: a message checked, its record encoded, placed, answered (PutResult)
    record_codec.py    the byte layout of a record, its encoder and decoder (pure code)
    property_codec.py  a record's properties, `name \\x01 value \\x02`
    checksum.py        CRC-32 of records, index keys and the checkpoint
    write_ring.py      where records land first, a mapping whose pages stay in memory
    commit_log.py      the log: appends under one lock, commits to segments, reads
    mapped_file.py     segment files named by offset, and queues of them (the consume queues' files too)
    flush_service.py   durability: the flush thread, group commit under SYNC_FLUSH, segments warmed ahead
    scan.py            the log read back at open: the ring restored, the segments checked record by record
    replay.py          a record read back replayed into its dispatch requests; the log's raw bytes

An append: appender.py -> record_codec.py -> commit_log.py -> write_ring.py; the dispatcher commits the ring to the
segments (mapped_file.py) and flush_service.py makes them durable.
"""
