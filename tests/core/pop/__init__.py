"""Tests of core/pop/."""
