"""Tests of remoting/."""
