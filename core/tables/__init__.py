"""The broker's tables: what it knows besides messages, each kept durable as RocketMQ keeps it.

topic_config.py        topics.json (TopicConfigManager): queues, permissions, message type
subscription_group.py  subscriptionGroup.json (SubscriptionGroupManager): consumer groups' settings
consumer_offsets.py    consumerOffset.json (ConsumerOffsetManager): each group's committed offsets
config_table.py        one JSON file of named configurations, read without locks
json_file.py           atomic JSON files: write to .tmp, fsync, keep a .bak, rename
state_table.py         a keyed table kept as core messages with a snapshot (MQTT sessions and retained
                       messages, the connector runtime's configs and positions)
"""
