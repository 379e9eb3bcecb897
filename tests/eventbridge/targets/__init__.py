"""Tests of eventbridge/targets/."""
