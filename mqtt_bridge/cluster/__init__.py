"""The MQTT gateway on a cluster of broker groups: what lets a device on one node receive what a device on another
publishes (docs/cluster.md, "MQTT on a cluster").

- filter_registry.py: which broker groups' sessions use each subscription filter (pure): every group's send hook
  names the light queues of the filters used anywhere in the cluster, so a message stored on one group waits in
  the light queues that sessions of every group read.
- filter_records.py: the registry's changes as core messages (topic MQTT_FILTERS, one queue on every group).
- membership.py: this group's part: the registry's changes written to every group (peers/) before a SUBACK, the
  others' records applied, session records and retained messages copied, session claims.
- remote_queues.py: the light queues of other groups as the gateway reads them: recent messages kept decoded, a
  long poll per queue that wakes the sessions reading it.
"""
