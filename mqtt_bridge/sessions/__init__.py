"""MQTT sessions: session.py (what outlives a connection: subscriptions, read positions, publishes in flight, and
delivery planning), session_rules.py (takeover, clean start, expiry, wills, QoS 2 duplicates: events in, actions
out, no I/O), session_table.py (every session, the connected links, and what the core keeps of them), and
state_records.py (session records, retained messages and QoS 2 records as core messages).
"""
