"""The base of every exception the gRPC endpoint defines (proxy/access_errors.py: who may not do what;
proxy/status_codes.py: a request the mapping refuses, with its RocketMQ code; proxy/server.py: an endpoint that
cannot start). Errors of the core reach it as core.CoreError and are answered in RocketMQ's codes."""

from __future__ import annotations


class ProxyError(Exception):
    """Base class of the gRPC endpoint's own exceptions."""
