"""Remoting frames, without I/O (as h11's connection): bytes in, commands out; a command in, bytes out.

A frame, big-endian (RocketMQ's RemotingCommand.encode and NettyDecoder):

    length        int32   what follows: 4 + header length + body length
    header mark   int32   top byte: the serialize type (0 JSON, 1 ROCKETMQ); low 24 bits: the header length
    header        the command's header (header_codec.py)
    body          the rest of the frame

A frame longer than MAX_FRAME_BYTES, shorter than its header mark, or whose header is longer than the frame, is
refused with RemotingProtocolError before any of it is buffered: the peer's connection is closed, nothing else.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from remoting.command import RemotingCommand, SerializeType
from remoting.errors import RemotingProtocolError
from remoting.header_codec import decode_header, encode_header

# Netty's LengthFieldBasedFrameDecoder in RocketMQ (NettyDecoder, FRAME_MAX_LENGTH): 16 MiB by default
# (com.rocketmq.remoting.frameMaxLength), the largest message a broker takes (4 MiB) with room for its header.
MAX_FRAME_BYTES = 16 * 1024 * 1024
_LENGTH = struct.Struct(">i")
_PREFIX = struct.Struct(">ii")
# Compact the buffer once this much of it was read (a large frame read in pieces would otherwise be copied often).
_COMPACT_AFTER = 64 * 1024


def encode_frame(command: RemotingCommand, serialize_type: SerializeType = SerializeType.JSON) -> bytes:
    """The frame of `command`, its header in `serialize_type` (JSON unless asked)."""
    header = encode_header(command, serialize_type)
    if len(header) > 0xFFFFFF:
        raise RemotingProtocolError(f"header of {len(header)} bytes does not fit a frame (16 MiB at most)")
    length = 4 + len(header) + len(command.body)
    if length > MAX_FRAME_BYTES:
        raise RemotingProtocolError(f"frame of {length} bytes is over the {MAX_FRAME_BYTES}-byte limit")
    return _PREFIX.pack(length, (serialize_type << 24) | len(header)) + header + command.body


def decode_frame(frame: bytes | memoryview) -> RemotingCommand:
    """The command of one whole frame without its length field (header mark, header, body)."""
    view = memoryview(frame)
    if len(view) < 4:
        raise RemotingProtocolError(f"frame of {len(view)} bytes has no header mark")
    (mark,) = _LENGTH.unpack_from(view, 0)
    serialize_type = (mark >> 24) & 0xFF
    header_size = mark & 0xFFFFFF
    if header_size > len(view) - 4:
        raise RemotingProtocolError(
            f"header of {header_size} bytes is longer than its frame ({len(view) - 4} bytes after the header mark)"
        )
    command = decode_header(view[4 : 4 + header_size], serialize_type)
    command.body = bytes(view[4 + header_size :])
    return command


class FrameReader:
    """Cuts a byte stream into frames and decodes them. `feed` the bytes as they come; `commands` yields each whole
    frame's command. After a RemotingProtocolError the stream is beyond repair: the caller closes the connection."""

    __slots__ = ("_buffer", "_start", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int = MAX_FRAME_BYTES) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._start = 0

    @property
    def buffered(self) -> int:
        """Bytes received and not yet part of a whole frame."""
        return len(self._buffer) - self._start

    def feed(self, data: bytes) -> None:
        self._buffer += data

    def commands(self) -> Iterator[RemotingCommand]:
        buffer = self._buffer
        while len(buffer) - self._start >= 4:
            (length,) = _LENGTH.unpack_from(buffer, self._start)
            if length < 4 or length > self.max_frame_bytes:
                raise RemotingProtocolError(
                    f"frame length {length} is outside 4..{self.max_frame_bytes} (the header mark and at most "
                    f"{self.max_frame_bytes} bytes)"
                )
            end = self._start + 4 + length
            if len(buffer) < end:
                break
            frame = bytes(memoryview(buffer)[self._start + 4 : end])
            self._start = end
            yield decode_frame(frame)
        if self._start >= _COMPACT_AFTER or self._start == len(buffer):
            del buffer[: self._start]
            self._start = 0
