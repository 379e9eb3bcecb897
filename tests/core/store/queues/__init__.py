"""Tests of core/store/queues/."""
