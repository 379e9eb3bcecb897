"""Tests of mqtt_bridge/sessions/."""
