"""A broker's place in its broker group (core.store.ha replicates the log beneath):

- role.py: `Replication` (broker.ha), the role as the doors ask it, and its changes under automatic failover;
- master_copy.py: what a slave copies from its master every 10 s (topics, groups, offsets, delay and timer
  progress), offsets merged so none moves back;
- master_services.py: the services only the master runs (delay levels, timers, recalls, transaction checks),
  started and stopped with the role.
"""
