"""Tests of core/scheduling/."""
