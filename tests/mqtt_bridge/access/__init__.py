"""Tests of mqtt_bridge/access/."""
