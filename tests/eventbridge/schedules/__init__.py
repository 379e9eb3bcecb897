"""Tests of eventbridge/schedules/."""
