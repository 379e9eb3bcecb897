"""Tests of mqtt_bridge/topics/."""
