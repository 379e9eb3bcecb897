"""Tests of mqtt_bridge/wire/."""
