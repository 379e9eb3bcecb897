"""Tests of core/retries/."""
