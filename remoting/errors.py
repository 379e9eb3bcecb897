"""The remoting package's errors: one base, and the error for a peer that breaks the protocol (a bad frame or
header), which closes that connection only."""

from __future__ import annotations


class RemotingError(Exception):
    """Base class of every error the remoting package raises."""


class RemotingProtocolError(RemotingError, ValueError):
    """The peer sent what the remoting protocol does not allow (a frame too large or too short, a header that does
    not fit its frame, a header that does not decode): the connection is closed, with this message in the log."""
