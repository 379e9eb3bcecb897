"""Tests of eventbridge/rules/."""
