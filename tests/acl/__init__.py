"""Tests of acl/."""
