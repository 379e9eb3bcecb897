"""The gRPC endpoint's tests: a target server fixture. (The RocketMQ 5 client's log and event loop: tests/conftest.py
and tests/rocketmq5_client.py.)"""

from tests.eventbridge.target_server import target  # noqa: F401 (a fixture: a started HTTP target server)
