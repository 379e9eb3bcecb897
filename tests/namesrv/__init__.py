"""Tests of namesrv/."""
