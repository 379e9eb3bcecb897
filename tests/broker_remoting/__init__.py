"""Tests of broker_remoting/: the broker's remoting port driven by RocketMQ 4 clients (rocketmq4_clients.py)."""
