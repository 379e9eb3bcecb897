"""Sans-IO framing: cut an MQTT byte stream into whole packets (MQTT 3.1.1 section 2.2, MQTT 5.0 section 2.1).

Every MQTT packet, at both protocol levels, starts with a fixed header:

    byte 0      packet type (high 4 bits) and flags (low 4 bits)
    bytes 1..4  remaining length: a variable byte integer, 7 bits per byte, least significant group first,
                the high bit set when another byte follows; 1 to 4 bytes, so at most 268,435,455
    ...         the remaining length counts the bytes after the fixed header (variable header and payload)

`FrameBuffer` holds what a connection has received and hands out each packet ("frame": fixed header and body)
once it is complete; it does no I/O and knows no protocol level, the codecs (`codec_v311`, `codec_v5`) read the
frames. The remaining length is checked against the connection's maximum packet size as soon as the fixed
header is complete, before the body is waited for.
"""

from __future__ import annotations

from collections.abc import Iterator

from mqtt_bridge.errors import MalformedPacket, PacketTooLarge

# MQTT 3.1.1 section 2.2.3, MQTT 5.0 section 1.5.5: at most four bytes of seven bits each.
MAX_VARIABLE_BYTE_INTEGER = 268_435_455
_MAX_VARIABLE_BYTE_INTEGER_SIZE = 4
_CONTINUATION_BIT = 0x80
_VALUE_BITS = 0x7F

# The largest packet, fixed header included (MQTT 5's Maximum Packet Size counts the same way, so this number
# can be sent in CONNACK as is), that the protocol can express.
PROTOCOL_MAX_PACKET_SIZE = 1 + _MAX_VARIABLE_BYTE_INTEGER_SIZE + MAX_VARIABLE_BYTE_INTEGER
# The smallest packet: a fixed header with remaining length 0 (PINGREQ, PINGRESP, a 3.1.1 DISCONNECT).
MIN_PACKET_SIZE = 2
# The largest packet a connection accepts unless configured otherwise: 1 MiB, EMQX's default `max_packet_size`.
# Mosquitto's `max_packet_size` defaults to 0, meaning the protocol limit of 256 MiB, and so does HiveMQ's; but a
# packet is held whole in memory until it is complete, per connection, so 10,000 clients each sending a maximal
# packet slowly would pin 2.5 TiB under the protocol limit and 10 GiB under this one. Device messages are small
# (AWS IoT Core caps a PUBLISH payload at 128 KiB); raise the limit per listener when a use needs more.
DEFAULT_MAX_PACKET_SIZE = 1024 * 1024
# Bytes of consumed frames kept at the front of the buffer before the unconsumed tail is moved down. Moving a
# tail of at most one partial packet once per 64 KiB consumed keeps the cost per received byte constant; the
# buffer is simply emptied, at no cost, whenever every byte in it has been consumed (the usual case).
_COMPACT_AFTER = 64 * 1024

# Names of the 16 packet types (MQTT 5.0 section 2.1.2) for messages; AUTH exists at protocol level 5 only.
PACKET_TYPE_NAMES = (
    "reserved packet type 0",
    "CONNECT",
    "CONNACK",
    "PUBLISH",
    "PUBACK",
    "PUBREC",
    "PUBREL",
    "PUBCOMP",
    "SUBSCRIBE",
    "SUBACK",
    "UNSUBSCRIBE",
    "UNSUBACK",
    "PINGREQ",
    "PINGRESP",
    "DISCONNECT",
    "AUTH",
)

_ONE_BYTE_LENGTHS = tuple(bytes((length,)) for length in range(_CONTINUATION_BIT))


def packet_type_name(first_byte: int) -> str:
    """The name of the packet type in a fixed header's first byte: 0x30 -> 'PUBLISH'."""
    return PACKET_TYPE_NAMES[first_byte >> 4]


def encode_variable_byte_integer(value: int) -> bytes:
    """Encode `value` (0 to 268,435,455) as an MQTT variable byte integer: 321 -> b'\\xc1\\x02'."""
    if 0 <= value < _CONTINUATION_BIT:
        return _ONE_BYTE_LENGTHS[value]
    if not 0 <= value <= MAX_VARIABLE_BYTE_INTEGER:
        raise ValueError(f"{value} cannot be encoded as a variable byte integer (0 to {MAX_VARIABLE_BYTE_INTEGER})")
    encoded = bytearray()
    while value >= _CONTINUATION_BIT:
        encoded.append((value & _VALUE_BITS) | _CONTINUATION_BIT)
        value >>= 7
    encoded.append(value)
    return bytes(encoded)


# The remaining length is one use of the variable byte integer; the name says which one a caller means.
encode_remaining_length = encode_variable_byte_integer


def decode_variable_byte_integer(
    data: bytes | bytearray | memoryview, offset: int, field: str = "remaining length"
) -> tuple[int, int] | None:
    """Return (value, size in bytes) of the variable byte integer at `data[offset:]`, None if it is incomplete.

    Raises MalformedPacket naming `field` if a fourth byte still has its continuation bit set.
    """
    value = 0
    shift = 0
    for index in range(offset, min(offset + _MAX_VARIABLE_BYTE_INTEGER_SIZE, len(data))):
        byte = data[index]
        value |= (byte & _VALUE_BITS) << shift
        if byte < _CONTINUATION_BIT:
            return value, index - offset + 1
        shift += 7
    if len(data) - offset >= _MAX_VARIABLE_BYTE_INTEGER_SIZE:
        shown = bytes(data[offset : offset + _MAX_VARIABLE_BYTE_INTEGER_SIZE]).hex(" ")
        raise MalformedPacket(
            f"{field}: variable byte integer {shown} ... is longer than {_MAX_VARIABLE_BYTE_INTEGER_SIZE} bytes "
            "(MQTT-1.5.5: a fourth byte must not have its continuation bit set)"
        )
    return None


class FrameBuffer:
    """Bytes received on one connection, handed out packet by packet.

    `feed` the bytes of each read, then take every complete packet with `next_frame` (or iterate `frames`)
    before the next read; a partial packet stays buffered for later feeds. Each frame is a memoryview of its
    own immutable bytes, so it stays valid and unchanged after later feeds. A malformed fixed header or a packet
    larger than `max_packet_size` (fixed header included) raises MalformedPacket or PacketTooLarge; the
    connection is then unusable and every later call raises the same error. `max_packet_size` may be changed
    between calls (a listener can hold the CONNECT to a smaller size than the packets that follow it).
    """

    __slots__ = ("_buffer", "_start", "max_packet_size")

    def __init__(self, max_packet_size: int = DEFAULT_MAX_PACKET_SIZE) -> None:
        if not MIN_PACKET_SIZE <= max_packet_size <= PROTOCOL_MAX_PACKET_SIZE:
            raise ValueError(
                f"max_packet_size {max_packet_size}: must be between {MIN_PACKET_SIZE} and "
                f"{PROTOCOL_MAX_PACKET_SIZE} bytes (the MQTT protocol limit)"
            )
        self.max_packet_size = max_packet_size
        self._buffer = bytearray()
        # Offset of the first byte not yet handed out in a frame.
        self._start = 0

    @property
    def buffered(self) -> int:
        """Bytes received and not yet handed out in a frame."""
        return len(self._buffer) - self._start

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes read from the connection."""
        if self._start >= _COMPACT_AFTER:
            del self._buffer[: self._start]
            self._start = 0
        self._buffer += data

    @property
    def data(self) -> bytearray:
        """The buffer that `next_bounds` positions refer to; read it, do not change it."""
        return self._buffer

    def next_bounds(self) -> tuple[int, int, int] | None:
        """(start, body, end): where the next complete packet, its body (after the fixed header) and its end are in
        `data`, without copying it; None until more bytes are fed. `advance(end)` hands the packet out; until
        then this returns the same packet again."""
        buffer = self._buffer
        start = self._start
        if len(buffer) - start < MIN_PACKET_SIZE:
            return None
        if buffer[start + 1] < _CONTINUATION_BIT:  # remaining length below 128: most packets
            remaining_length, length_size = buffer[start + 1], 1
        else:
            header = decode_variable_byte_integer(buffer, start + 1)
            if header is None:
                return None
            remaining_length, length_size = header
        size = 1 + length_size + remaining_length
        if size > self.max_packet_size:
            raise PacketTooLarge(
                f"{packet_type_name(buffer[start])} packet of {size} bytes (remaining length {remaining_length}) "
                f"exceeds the maximum packet size of {self.max_packet_size} bytes"
            )
        end = start + size
        if end > len(buffer):
            return None
        return start, start + 1 + length_size, end

    def advance(self, end: int) -> None:
        """Hand out the packet that ends at `end` (from `next_bounds`): positions in `data` are void after this."""
        if end == len(self._buffer):
            self._buffer.clear()
            self._start = 0
        else:
            self._start = end

    def next_frame(self) -> memoryview | None:
        """Return the next complete packet, fixed header included, or None until more bytes are fed."""
        bounds = self.next_bounds()
        if bounds is None:
            return None
        start, _, end = bounds
        # A view into the bytearray would forbid resizing it while the caller holds the frame, so the frame is
        # copied out; slicing then bytes() copies twice but beats a memoryview's set-up below a few KiB, and a
        # packet costs more to decode than to copy.
        frame = bytes(self._buffer[start:end])
        self.advance(end)
        return memoryview(frame)

    def frames(self) -> Iterator[memoryview]:
        """Yield every complete packet buffered so far, in order."""
        while (frame := self.next_frame()) is not None:
            yield frame
