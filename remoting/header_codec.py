"""A remoting command's header in its two serialize types (RocketMQ's RemotingCommand, RocketMQSerializable).

JSON (serialize type 0), what Java's server writes by default and every client reads:

    {"code":10,"language":"JAVA","version":433,"opaque":7,"flag":0,"remark":"...","extFields":{"topic":"t",...},
     "serializeTypeCurrentRPC":"JSON"}

`language` is the LanguageCode's name (a number is taken too); a null or missing remark is none. Java keeps
extFields as strings; clients write some as JSON numbers or booleans (`"defaultTopicQueueNums":4`, `"k":true`),
which are taken as the strings Java's JSON reader makes of them (the number as written, "true"); a null value is
left out. The header's own numbers may come as strings too.

ROCKETMQ (serialize type 1), big-endian:

    code      int16      language  int8 (LanguageCode)     version  int16
    opaque    int32      flag      int32
    remark    int32 length, UTF-8 bytes (length 0: none)
    extFields int32 length of what follows, then per field: int16 key length, key, int32 value length, value

Every length is checked against the header's: a header that does not decode raises RemotingProtocolError naming
the field.
"""

from __future__ import annotations

import json
import struct
from typing import Any

from remoting.command import LanguageCode, RemotingCommand, SerializeType
from remoting.errors import RemotingProtocolError

_FIXED = struct.Struct(">hbhii")  # code, language, version, opaque, flag
_INT = struct.Struct(">i")
_SHORT = struct.Struct(">h")
_INT32_RANGE = range(-(2**31), 2**31)
_LANGUAGE_NAMES = {language.name: language for language in LanguageCode}


def decode_header(data: bytes | memoryview, serialize_type: int) -> RemotingCommand:
    """The command whose header is `data` (its body is the caller's to set)."""
    if serialize_type == SerializeType.JSON:
        return _decode_json(bytes(data))
    if serialize_type == SerializeType.ROCKETMQ:
        return _decode_binary(memoryview(data))
    raise RemotingProtocolError(f"serialize type {serialize_type} is neither JSON (0) nor ROCKETMQ (1)")


def encode_header(command: RemotingCommand, serialize_type: SerializeType = SerializeType.JSON) -> bytes:
    if serialize_type is SerializeType.ROCKETMQ:
        return _encode_binary(command)
    header: dict[str, Any] = {
        "code": command.code,
        "language": command.language.name,
        "version": command.version,
        "opaque": command.opaque,
        "flag": command.flag,
        "serializeTypeCurrentRPC": "JSON",
    }
    if command.remark is not None:
        header["remark"] = command.remark
    if command.ext_fields:
        header["extFields"] = command.ext_fields
    return json.dumps(header, ensure_ascii=False, separators=(",", ":")).encode()


# --- JSON ------------------------------------------------------------------------------------------------------------


def _decode_json(data: bytes) -> RemotingCommand:
    try:
        # Numbers are kept as they were written: an extFields number becomes the string Java's reader makes of it.
        header = json.loads(data, parse_int=str, parse_float=str, parse_constant=_refuse_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise RemotingProtocolError(f"JSON header does not parse: {exc}") from None
    if not isinstance(header, dict):
        raise RemotingProtocolError(f"JSON header is a {type(header).__name__}, not an object")
    ext = header.get("extFields")
    if ext is not None and not isinstance(ext, dict):
        raise RemotingProtocolError(f"JSON header: extFields is a {type(ext).__name__}, not an object")
    remark = header.get("remark")
    if remark is not None and not isinstance(remark, str):
        remark = _as_java_string(remark)
    return RemotingCommand(
        code=_int_field(header, "code", required=True),
        language=_language(header.get("language")),
        version=_int_field(header, "version"),
        opaque=_int_field(header, "opaque"),
        flag=_int_field(header, "flag"),
        remark=remark,
        ext_fields={name: text for name, value in (ext or {}).items() if (text := _as_java_string(value)) is not None},
        serialize_type=SerializeType.JSON,
    )


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def _int_field(header: dict[str, Any], name: str, required: bool = False) -> int:
    value = header.get(name)
    if value is None:
        if required:
            raise RemotingProtocolError(f"JSON header has no {name}")
        return 0
    if isinstance(value, str):  # a number (kept as written), or a number written as a string: both are taken
        try:
            value = int(value.strip())
        except ValueError:
            raise RemotingProtocolError(f"JSON header: {name} {value!r} is not an integer") from None
    if not isinstance(value, int) or value not in _INT32_RANGE:
        raise RemotingProtocolError(f"JSON header: {name} {value!r} is not a 32-bit integer")
    return value


def _language(value: object) -> LanguageCode:
    """The sender's language, by name or number; one mqgate does not know is OTHER (it changes nothing served)."""
    if value is None:
        return LanguageCode.JAVA
    if isinstance(value, str):
        if value in _LANGUAGE_NAMES:
            return _LANGUAGE_NAMES[value]
        try:
            return LanguageCode(int(value))
        except ValueError:
            return LanguageCode.OTHER
    return LanguageCode.OTHER


def _as_java_string(value: object) -> str | None:
    """A JSON value as Java's reader puts it in a String field: text and numbers as written (numbers were kept as
    their text), true/false, an object or array as its JSON; null is no value."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- ROCKETMQ binary ------------------------------------------------------------------------------------------------


def _decode_binary(data: memoryview) -> RemotingCommand:
    size = len(data)
    if size < _FIXED.size + 8:
        raise RemotingProtocolError(
            f"binary header of {size} bytes is shorter than its fixed fields ({_FIXED.size + 8})"
        )
    code, language, version, opaque, flag = _FIXED.unpack_from(data, 0)
    position = _FIXED.size
    remark, position = _string(data, position, _INT, "remark")
    (ext_size,) = _INT.unpack_from(data, position)
    position += 4
    if ext_size < 0 or ext_size > size - position:
        raise RemotingProtocolError(f"binary header: extFields of {ext_size} bytes past the header's end")
    end = position + ext_size
    ext: dict[str, str] = {}
    while position < end:
        key, position = _string(data, position, _SHORT, "extFields key", end)
        value, position = _string(data, position, _INT, f"extFields value of {key!r}", end)
        ext[key or ""] = value or ""
    try:
        language_code = LanguageCode(language)
    except ValueError:
        language_code = LanguageCode.OTHER
    return RemotingCommand(
        code=code,
        language=language_code,
        version=version,
        opaque=opaque,
        flag=flag,
        remark=remark,
        ext_fields=ext,
        serialize_type=SerializeType.ROCKETMQ,
    )


def _string(
    data: memoryview, position: int, length: struct.Struct, what: str, end: int | None = None
) -> tuple[str | None, int]:
    """A length-prefixed UTF-8 string at `position` (length 0: none), and the position after it."""
    end = len(data) if end is None else end
    if position + length.size > end:
        raise RemotingProtocolError(f"binary header: {what} length past the header's end")
    (size,) = length.unpack_from(data, position)
    position += length.size
    if size < 0 or size > end - position:
        raise RemotingProtocolError(f"binary header: {what} of {size} bytes past the header's end")
    if size == 0:
        return None, position
    try:
        return str(data[position : position + size], "utf-8"), position + size
    except UnicodeDecodeError:
        raise RemotingProtocolError(f"binary header: {what} is not UTF-8") from None


def _encode_binary(command: RemotingCommand) -> bytes:
    parts = [_FIXED.pack(command.code, command.language, command.version, command.opaque, command.flag)]
    remark = command.remark.encode() if command.remark else b""
    parts += [_INT.pack(len(remark)), remark]
    fields = bytearray()
    for name, value in command.ext_fields.items():
        key, text = name.encode(), value.encode()
        fields += _SHORT.pack(len(key)) + key + _INT.pack(len(text)) + text
    parts += [_INT.pack(len(fields)), bytes(fields)]
    return b"".join(parts)
