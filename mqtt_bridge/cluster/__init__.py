"""The MQTT gateway on a cluster of broker groups: what lets a device on one node receive what a device on another
publishes (docs/cluster.md, "MQTT on a cluster").

- filter_registry.py: which broker groups' sessions use each subscription filter (pure): every group's send hook
  names the light queues of the filters used anywhere in the cluster, so a message stored on one group waits in
  the light queues that sessions of every group read.
- filter_records.py: the registry's changes as core messages (topic MQTT_FILTERS, one queue on every group).
- peers.py: the other groups through the remote client: the registry's changes written to every group before a
  SUBACK, and the light queues of other groups read and their positions committed there.
- remote_queues.py: the light queues of other groups as the gateway reads them: recent messages kept decoded, a
  long poll per queue that wakes the sessions reading it.
"""
