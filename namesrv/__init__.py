"""The NameServer, as RocketMQ's: brokers register their topics with it every 30 s, and clients ask it where a
topic's queues are (its route). It keeps nothing on disk: what brokers registered is all it knows, and a broker
silent for 120 s, or whose connection closes, leaves the routes.

- route_table.py: the tables (clusters, broker groups and their addresses by broker id, each topic's queues per
  broker group, the live brokers), and what registering, unregistering, expiring and asking a route do to them;
  no I/O, a clock passed in.
- server.py: the NameServer's request codes on a remoting server (remoting/server.py), and the expiry scan.

A route's way: a broker's REGISTER_BROKER (its topic configs and their data version) -> RouteTable.register ->
a client's GET_ROUTEINFO_BY_TOPIC -> RouteTable.route -> TopicRouteData's JSON, `brokerAddrs` keyed by broker id.
"""
