"""`mqgate`: the command and the one place that wires the parts of mqgate together.

cli.py               the `mqgate` command (its entry point) and the commands that need no server
process.py           what a command that runs a server shares: logging, the ready line, stop signals, the loop
server.py            `mqgate serve`: the store, the broker, every door, started and stopped in order
mqtt_door.py, rocketmq_doors.py   starting the MQTT gateway, the remoting port, the NameServer, the gRPC endpoint
terms.py             under a controller: the doors that run for each term as master
failover.py          under a controller: the broker's role and its doors following etcd's record
listen_errors.py     the error of a port that cannot be listened on
commands/            the commands that speak to a running server (admin, connect, events, rules)
config/              settings: defaults, file and flags
http/                the HTTP port: the admin API, the dashboard, metrics
compile_modules.py   the build step that compiles the per-message modules with mypyc
"""
