"""Tests of eventbridge/patterns/."""
