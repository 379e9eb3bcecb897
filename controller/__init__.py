"""Automatic failover of a broker group's master, decided through etcd (RocketMQ 5's controller mode, on an existing
consensus service rather than a Raft of its own). Like a door, it uses only what `core` exports.

- election.py: the rules, free of I/O: who may become master, the next epoch, who is in the SyncStateSet.
- records.py: the group's record and its brokers' heartbeats in etcd (compare-and-set, leases), over aetcd.
"""
