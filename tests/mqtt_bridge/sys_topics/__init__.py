"""Tests of mqtt_bridge/sys_topics/."""
