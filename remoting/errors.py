"""The remoting package's errors: one base; the error for a peer that breaks the protocol (a bad frame or header),
which closes that connection only; and the error for a request a server refuses, which is answered."""

from __future__ import annotations


class RemotingError(Exception):
    """Base class of every error the remoting package raises."""


class RemotingProtocolError(RemotingError, ValueError):
    """The peer sent what the remoting protocol does not allow (a frame too large or too short, a header that does
    not fit its frame, a header that does not decode): the connection is closed, with this message in the log."""


class RemotingRequestError(RemotingError, ValueError):
    """A well-framed request a server refuses (a missing or malformed header field, a body it cannot read): answered
    with `code` (SYSTEM_ERROR unless given, as RocketMQ's processors answer an exception) and this message as the
    remark, without a traceback in the log; the connection goes on. `ext_fields` go in the reply's header."""

    def __init__(self, message: str, code: int = 1, ext_fields: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.ext_fields = ext_fields
