"""The `$SYS/broker/...` tree: tree.py computes its values (counters, load averages) from the gateway's figures,
publishing.py sends what changed to the matching subscriptions every `[mqtt] sys_interval` seconds (in memory only).
"""
