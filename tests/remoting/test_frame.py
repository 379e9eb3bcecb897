"""Remoting frames and headers without a socket (remoting/frame.py, remoting/header_codec.py): generated commands
round-trip through both serialize types and any cut of the byte stream; the binary header agrees with a plain
reference reader written here from RocketMQSerializable; JSON headers take what clients write (numbers and booleans
in extFields, names or numbers for the language); and anything malformed raises RemotingProtocolError, never
another error, and a length over the limit is refused before its bytes arrive."""

from __future__ import annotations

import contextlib
import itertools
import json
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from remoting.command import ONEWAY_FLAG, RESPONSE_FLAG, LanguageCode, RemotingCommand, SerializeType
from remoting.errors import RemotingProtocolError
from remoting.frame import MAX_FRAME_BYTES, FrameReader, decode_frame, encode_frame

INT32 = st.integers(-(2**31), 2**31 - 1)
text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)

commands = st.builds(
    RemotingCommand,
    code=st.integers(-(2**15), 2**15 - 1),
    opaque=INT32,
    flag=st.sampled_from([0, RESPONSE_FLAG, ONEWAY_FLAG, RESPONSE_FLAG | ONEWAY_FLAG]),
    remark=st.one_of(st.none(), text.filter(bool)),  # the binary layout writes an empty remark as none
    ext_fields=st.dictionaries(text, text, max_size=6),
    body=st.binary(max_size=200),
    language=st.sampled_from(list(LanguageCode)),
    version=st.integers(-(2**15), 2**15 - 1),
)


def read_all(data: bytes, cuts: list[int]) -> list[RemotingCommand]:
    reader = FrameReader()
    found = []
    edges = [0, *sorted({cut % (len(data) + 1) for cut in cuts}), len(data)]
    for start, end in itertools.pairwise(edges):
        reader.feed(data[start:end])
        found += list(reader.commands())
    assert reader.buffered == 0
    return found


def fields(command: RemotingCommand) -> tuple[object, ...]:
    return (command.code, command.opaque, command.flag, command.remark, command.ext_fields, command.body,
            command.language, command.version)  # fmt: skip


@given(st.lists(commands, max_size=5), st.sampled_from(list(SerializeType)), st.lists(st.integers(0, 10_000)))
def test_commands_round_trip_through_any_cut_of_the_stream(sent, serialize_type, cuts):
    data = b"".join(encode_frame(command, serialize_type) for command in sent)
    got = read_all(data, cuts)
    assert [fields(command) for command in got] == [fields(command) for command in sent]
    assert all(command.serialize_type is serialize_type for command in got)


def reference_binary_header(header: bytes) -> tuple[object, ...]:
    """RocketMQSerializable.rocketMQProtocolDecode, read the plain way."""
    code, language, version, opaque, flag = struct.unpack_from(">hbhii", header, 0)
    at = 13
    (remark_size,) = struct.unpack_from(">i", header, at)
    at += 4
    remark = header[at : at + remark_size].decode() if remark_size else None
    at += remark_size
    (ext_size,) = struct.unpack_from(">i", header, at)
    at += 4
    ext, end = {}, at + ext_size
    while at < end:
        (key_size,) = struct.unpack_from(">h", header, at)
        key = header[at + 2 : at + 2 + key_size].decode()
        at += 2 + key_size
        (value_size,) = struct.unpack_from(">i", header, at)
        ext[key] = header[at + 4 : at + 4 + value_size].decode()
        at += 4 + value_size
    return code, language, version, opaque, flag, remark, ext


@given(commands)
def test_the_binary_header_agrees_with_a_plain_reader(command):
    frame = encode_frame(command, SerializeType.ROCKETMQ)
    length, mark = struct.unpack_from(">ii", frame, 0)
    assert length == len(frame) - 4 and mark >> 24 == 1
    header = frame[8 : 8 + (mark & 0xFFFFFF)]
    got = decode_frame(frame[4:])
    assert reference_binary_header(header) == (
        got.code, int(got.language), got.version, got.opaque, got.flag, got.remark, got.ext_fields,
    )  # fmt: skip
    assert frame[8 + len(header) :] == command.body


def json_frame(header: object, body: bytes = b"") -> bytes:
    raw = json.dumps(header).encode() if not isinstance(header, bytes) else header
    return struct.pack(">ii", 4 + len(raw) + len(body), len(raw)) + raw + body


def test_a_json_header_as_the_cpp_client_writes_it():
    header = {
        "code": 10,
        "language": "CPP",
        "version": 405,
        "opaque": 3,
        "flag": 0,
        "remark": "",
        "extFields": {
            "producerGroup": "g",
            "queueId": 2,
            "unitMode": False,
            "AccessKey": "",
            "maxReconsumeTimes": 16.0,
        },
    }
    [command] = read_all(json_frame(header, b"hello"), [])
    assert (command.code, command.language, command.version, command.opaque, command.body) == (
        10, LanguageCode.CPP, 405, 3, b"hello",
    )  # fmt: skip
    # Numbers as written, booleans as Java's reader writes them.
    assert command.ext_fields == {
        "producerGroup": "g", "queueId": "2", "unitMode": "false", "AccessKey": "", "maxReconsumeTimes": "16.0",
    }  # fmt: skip
    assert command.remark == "" and not command.is_response and not command.is_oneway


def test_json_header_fields_may_be_strings_numbers_or_missing():
    [command] = read_all(json_frame({"code": "105", "language": 9, "extFields": {"topic": "t", "gone": None}}), [])
    assert (command.code, command.language, command.opaque, command.flag, command.version) == (
        105, LanguageCode.GO, 0, 0, 0,
    )  # fmt: skip
    assert command.ext_fields == {"topic": "t"}
    [unknown] = read_all(json_frame({"code": 1, "language": "COBOL"}), [])
    assert unknown.language is LanguageCode.OTHER


def test_a_reply_is_json_echoing_the_requests_opaque():
    request = RemotingCommand(code=105, opaque=77, ext_fields={"topic": "t"}, serialize_type=SerializeType.ROCKETMQ)
    reply = request.reply(17, "no route info of this topic: t")
    frame = encode_frame(reply)
    _length, mark = struct.unpack_from(">ii", frame, 0)
    assert mark >> 24 == 0  # JSON: both test clients read the header length without masking the type byte
    header = json.loads(frame[8 : 8 + mark])
    assert header["opaque"] == 77 and header["flag"] == RESPONSE_FLAG and header["code"] == 17
    assert header["remark"] == "no route info of this topic: t" and "extFields" not in header


@pytest.mark.parametrize(
    ("data", "phrase"),
    [
        (struct.pack(">i", 2**31 - 1), "outside 4.."),  # a 2 GiB length: refused before its bytes come
        (struct.pack(">i", MAX_FRAME_BYTES + 1), "outside 4.."),
        (struct.pack(">i", -5), "outside 4.."),
        (struct.pack(">i", 2), "outside 4.."),
        (struct.pack(">ii", 8, 100) + b"xxxx", "longer than its frame"),
        (struct.pack(">ii", 6, (2 << 24) | 2) + b"{}", "serialize type 2"),
        (json_frame(b"[1, 2]"), "not an object"),
        (json_frame(b"{bad json"), "does not parse"),
        (json_frame({"flag": 0}), "has no code"),
        (json_frame({"code": 2**40}), "not a 32-bit integer"),
        (json_frame({"code": 1, "extFields": [1]}), "extFields is a list"),
        (json_frame(b'{"code": NaN}'), "does not parse"),
        (struct.pack(">ii", 8, (1 << 24) | 4) + b"\0\0\0\0", "shorter than its fixed fields"),
    ],
)
def test_malformed_frames_say_what_is_wrong(data, phrase):
    reader = FrameReader()
    reader.feed(data)
    with pytest.raises(RemotingProtocolError, match=phrase):
        list(reader.commands())


def binary_header_frame(header: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(header), (1 << 24) | len(header)) + header


@pytest.mark.parametrize(
    ("header", "phrase"),
    [
        (struct.pack(">hbhii", 10, 0, 1, 1, 0) + struct.pack(">i", 50) + b"ab" + struct.pack(">i", 0), "remark of 50"),
        (struct.pack(">hbhii", 10, 0, 1, 1, 0) + struct.pack(">ii", 0, 99), "extFields of 99"),
        (struct.pack(">hbhii", 10, 0, 1, 1, 0) + struct.pack(">ii", 0, 4) + struct.pack(">h", 9) + b"ab", "key"),
        (struct.pack(">hbhii", 10, 0, 1, 1, 0) + struct.pack(">i", 1) + b"\xff" + struct.pack(">i", 0), "not UTF-8"),
        (struct.pack(">hbhii", 10, 0, 1, 1, 0) + struct.pack(">i", -1) + struct.pack(">i", 0), "remark of -1"),
    ],
)
def test_malformed_binary_headers_say_which_field(header, phrase):
    with pytest.raises(RemotingProtocolError, match=phrase):
        decode_frame(binary_header_frame(header)[4:])


@given(st.binary(max_size=300))
def test_any_bytes_give_commands_or_a_protocol_error(data):
    reader = FrameReader()
    reader.feed(data)
    with contextlib.suppress(RemotingProtocolError):
        list(reader.commands())


@given(st.binary(max_size=200), st.sampled_from([0, 1, 7]))
def test_any_header_bytes_give_a_command_or_a_protocol_error(header, serialize_type):
    frame = struct.pack(">i", (serialize_type << 24) | len(header)) + header
    with contextlib.suppress(RemotingProtocolError):
        decode_frame(frame)
