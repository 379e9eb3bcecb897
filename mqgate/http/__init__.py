"""mqgate's HTTP port: one aiohttp application serving every HTTP API, the dashboard and /metrics.

    app.py                 the application and its server: JSON errors, the access rule, the request log
    config.py              its settings ([http])
    access.py              who may use the port (token, admin users) and the audit log of changes
    admin_api.py, admin_messages_api.py, admin_json.py   the admin API (topics, groups, clients, messages, the
                           store), as RocketMQ's admin tools see a broker
    dashboard.py, dashboard_files/   the browser page over those APIs
    metrics.py, mqtt_metrics.py      GET /metrics, in the Prometheus text format

The connector and EventBridge APIs are their packages' own routes (connectors/rest.py, eventbridge/rest.py), added
to the same application by mqgate/server.py.
"""
