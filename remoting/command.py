"""One remoting command: a request or its reply, as RocketMQ's RemotingCommand holds it.

`opaque` pairs a reply with its request (a reply echoes it); `flag` bit 0 marks a reply, bit 1 a oneway request (no
reply is expected). `ext_fields` are the command's custom header, strings by name (`topic`, `queueId`, ...);
`language` is the sender's (LanguageCode: JAVA, CPP, ...), `version` its RocketMQ version number.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

# RemotingCommand's flag bits (RPC_TYPE, RPC_ONEWAY).
RESPONSE_FLAG = 1 << 0
ONEWAY_FLAG = 1 << 1


class SerializeType(enum.IntEnum):
    """How a frame's header is written: the top byte of the header-length field."""

    JSON = 0
    ROCKETMQ = 1


class LanguageCode(enum.IntEnum):
    """The sender's language, as RocketMQ numbers it (the binary header carries the number, JSON the name)."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


# The version mqgate's own commands carry: RocketMQ 4.9.4's number in MQVersion (V4_9_4).
MQGATE_VERSION = 433


@dataclass(slots=True)
class RemotingCommand:
    code: int
    opaque: int = 0
    flag: int = 0
    remark: str | None = None
    ext_fields: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    language: LanguageCode = LanguageCode.JAVA
    version: int = MQGATE_VERSION
    # How the header came (a reply is written in JSON whatever the request used: what both test clients read).
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & RESPONSE_FLAG)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & ONEWAY_FLAG)

    def reply(
        self, code: int, remark: str | None = None, ext_fields: dict[str, str] | None = None, body: bytes = b""
    ) -> RemotingCommand:
        """The reply to this request: its opaque, the response flag, in JSON."""
        return RemotingCommand(
            code=code,
            opaque=self.opaque,
            flag=RESPONSE_FLAG,
            remark=remark,
            ext_fields=ext_fields if ext_fields is not None else {},
            body=body,
        )
