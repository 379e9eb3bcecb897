"""The base of every exception the gRPC endpoint defines (proxy/status_codes.py: a request the mapping refuses, with
its RocketMQ code; proxy/server.py: an endpoint that cannot start). Access refusals are the plain ACL's (acl.errors);
errors of the core reach it as core.CoreError. Both are answered in RocketMQ's codes (proxy/status_codes.py)."""

from __future__ import annotations


class ProxyError(Exception):
    """Base class of the gRPC endpoint's own exceptions."""
