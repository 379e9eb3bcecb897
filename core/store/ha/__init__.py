"""Replication of the commit log from a master to its slaves (RocketMQ's store/ha): the slave copies the master's
log byte for byte and its dispatcher builds its own consume queues and index from the copy.

    config.py        HAConfig, the `[ha]` settings
    frames.py        the bytes of the HA link (reports, frames), free of I/O
    continuation.py  the slave's check that what arrives continues its log, and its cut into whole records
    master.py        the master's HA port, a link per slave, and the SYNC_MASTER waiters
    slave.py         the slave's link to its master
    states.py        what a store says of its replication (slaves' lag, the link to the master)
    epoch_file.py    the master epochs of the log and where each begins; how far two logs are the same
"""
