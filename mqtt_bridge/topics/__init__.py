"""MQTT topics: topic.py (names and filters, their rules and levels), topic_trie.py (the subscription trie that names
the filters a topic matches, and the tree of retained topics a filter matches), topic_mapping.py (which core topic
stores an MQTT topic: its first level, or `%MQTT%` and a reversible escape).
"""
