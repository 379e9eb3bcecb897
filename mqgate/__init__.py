"""`mqgate`: the command and the one place that wires the parts of mqgate together.

cli.py               the `mqgate` command (its entry point) and the commands that need no server
server.py            `mqgate serve`: the store, the broker, every door, started and stopped in order
commands/            the commands that speak to a running server (admin, connect, events, rules)
config/              settings: defaults, file and flags
http/                the HTTP port: the admin API, the dashboard, metrics
compile_modules.py   the build step that compiles the per-message modules with mypyc
"""
