"""The other nodes of a cluster, as mqgate's own doors (MQTT, EventBridge, connectors) see them through the remote
client: what lets a door of one node use the whole cluster (docs/cluster.md).

    group_peers.py       the other broker groups: a door's records written to queue 0 of its records topic on every
                         group, the groups alive now, other groups' light queues read and positions committed there
    owners.py            which live group's node runs each piece of work (an EventBridge target, a connector task):
                         rendezvous hashing, so a group coming or going moves only its own share (pure)
    live_groups.py       the live groups, asked of the NameServers every second, with a callback when they change
    record_listeners.py  one stored listener per broker, handing each records topic's records to its door
    versions.py          a write's version, which of two wins, records cut under their size (pure)
    shared_records.py    what shared state's records share: a starting node's hello and the others' states, retries
    file_versions.py     the versions of a shared directory's files and which of two wins (pure)
    shared_directory.py  a directory whose files are the same on every node (EventBridge's rules): a file written
                         or deleted on one node is written or deleted on the others
    entry_versions.py    the versions of a shared table's entries, which write wins, their records (pure)
    shared_table.py      a keyed table of JSON entries the same on every node (the connectors' configs)
"""
