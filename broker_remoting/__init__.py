"""The broker's remoting port: RocketMQ 4's broker request codes (send, pull, offsets, heartbeats, transactions,
send-back, locks, queries, admin) served on the core, so that RocketMQ 4 clients produce and consume unchanged;
and the broker's registration with its NameServers. A front door: it uses only the public core API and the
protocol of remoting/.

- config.py: the [remoting] settings.
- door.py: the remoting server with every code's handler, started and closed by `mqgate serve`.
- replication.py: what a master tells its slaves (offsets, delay progress, HA status) and a slave's copy of its
  master's tables.
"""
