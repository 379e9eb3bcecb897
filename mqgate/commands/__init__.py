"""The sub-commands of `mqgate` beyond `serve`, `config`, `store` and `passwd` (those are mqgate/cli.py's): each
module adds its parser; all but namesrv.py run their actions against a running `mqgate serve` through its HTTP API.

    admin.py, admin_message.py   `mqgate admin` (as RocketMQ's mqadmin): topics, groups, clients, messages
    connect.py                   `mqgate connect`: connectors (its RestClient is every command's HTTP client)
    events.py                    `mqgate events`: replays, dead letters
    namesrv.py                   `mqgate namesrv`: a NameServer alone, as RocketMQ's mqnamesrv
    rules.py                     `mqgate rules`: test a pattern, list rules and refused files
    output.py, terminal.py       how they print: tables with ids whole, --json, progress on a terminal
"""
