"""The index (RocketMQ's index package): hash tables on disk from message keys and unique ids to commit-log
offsets, for message queries; built from the log, so rebuilt when in doubt.

    file.py     one index file: header, hash slots, entries
    service.py  the index directory: files in creation order, which one a key goes to, queries
    process.py  the store's side of the index process (mqgate-index): start, requests, restarts
    child.py    the index process's own side (`python -m core.store.index.child`): its main loop
    builder.py  the index process's work: records read from the log's segments, their keys indexed

Dispatched records -> process.py (a shared position) -> child.py -> builder.py -> service.py -> file.py; or, with
StoreConfig.index_process off, the dispatcher -> service.py in the store's own process.
"""
