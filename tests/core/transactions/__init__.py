"""Tests of core/transactions/."""
