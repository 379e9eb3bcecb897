"""Tests of core/store/index/."""
