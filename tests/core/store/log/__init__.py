"""Tests of core/store/log/."""
