"""Fixtures shared by the EventBridge tests."""

from tests.eventbridge.target_server import target  # noqa: F401 (a fixture: a started HTTP target server)
