"""Tests of core/tables/."""
