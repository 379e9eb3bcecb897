"""Tests of eventbridge/archives/."""
