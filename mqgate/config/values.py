"""How each setting's value is read from a configuration file or a flag (sizes, ports, MQTT two-byte integers,
flush modes, log levels, ...) and how a size is shown again. Each parser takes the value as TOML or YAML gave it
and returns it checked, or raises ValueError saying what is allowed; settings.py adds the file, line and key."""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable
from typing import Any

from core import BrokerRole, FlushMode

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
# A parser: the value as the file or flag gave it, checked and converted.
Parser = Callable[[object], Any]

KiB = 1024
MiB = 1024 * KiB
GiB = 1024 * MiB
TiB = 1024 * GiB
# Binary units only: "MB" means 10**6 to some readers and 2**20 to others, so it is refused rather than guessed.
SIZE_UNITS = {"": 1, "B": 1, "KIB": KiB, "MIB": MiB, "GIB": GiB, "TIB": TiB}
AMBIGUOUS_SIZE_UNITS = {"K", "KB", "M", "MB", "G", "GB", "T", "TB"}
SIZE_ALLOWED = 'a size: an integer number of bytes, or a string with a binary unit ("4096", "512KiB", "64MiB", "1GiB")'
_SIZE_PATTERN = re.compile(r"(\d[\d_]*)\s*([A-Za-z]*)")


def describe_value(value: object) -> str:
    """What kind of value it is, and the value, for an error message: `a string ("10")`."""
    kind = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", type(None): "no value"}.get(
        type(value)
    )
    if kind is None:
        kind = "a table" if isinstance(value, dict) else "a list" if isinstance(value, list) else type(value).__name__
    return f"{kind} ({json.dumps(value, default=str)})"


def parse_size(value: object) -> int:
    """Bytes from an integer or a string such as "64MiB"; must be positive."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    elif isinstance(value, str):
        match = _SIZE_PATTERN.fullmatch(value.strip())
        unit = match.group(2).upper() if match else ""
        if match is None or unit not in SIZE_UNITS:
            hint = "; use KiB, MiB, GiB or TiB (powers of 1024)" if unit in AMBIGUOUS_SIZE_UNITS else ""
            raise ValueError(f"{value!r} is not a size{hint}; expected {SIZE_ALLOWED}")
        size = int(match.group(1).replace("_", "")) * SIZE_UNITS[unit]
    else:
        raise ValueError(f"expected {SIZE_ALLOWED}, got {describe_value(value)}")
    if size <= 0:
        raise ValueError(f"{value!r}: a size must be positive")
    return size


def parse_positive_int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"expected a positive integer, got {describe_value(value)}")
    if value <= 0:
        raise ValueError(f"{value}: must be a positive integer")
    return value


def parse_uint16(value: object) -> int:
    """An MQTT two-byte integer setting: 0 to 65535."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"expected an integer from 0 to 65535, got {describe_value(value)}")
    if not 0 <= value <= 65535:
        raise ValueError(f"{value}: must be from 0 to 65535 (an MQTT two-byte integer)")
    return value


def parse_positive_uint16(value: object) -> int:
    """An MQTT two-byte integer setting that 0 would make meaningless (Receive Maximum): 1 to 65535."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"expected an integer from 1 to 65535, got {describe_value(value)}")
    if not 1 <= value <= 65535:
        raise ValueError(f"{value}: must be from 1 to 65535 (an MQTT two-byte integer; 0 is a protocol error)")
    return value


def parse_port(value: object) -> int:
    port = parse_positive_int(value)
    if port > 65535:
        raise ValueError(f"{port}: a port goes from 1 to 65535")
    return port


def parse_port_or_zero(value: object) -> int:
    if value == 0 and not isinstance(value, bool):
        return 0
    return parse_port(value)


def parse_optional_port(value: object) -> int | None:
    return None if value is None else parse_port_or_zero(value)


def parse_optional_string(value: object) -> str | None:
    return None if value is None else parse_string(value)


def parse_string_list(value: object) -> tuple[str, ...]:
    if not isinstance(value, list | tuple) or not all(isinstance(item, str) for item in value):
        raise ValueError(f"expected a list of strings, got {describe_value(value)}")
    return tuple(value)


def parse_host_port_list(value: object) -> tuple[str, ...]:
    """Addresses written HOST:PORT, such as NameServers' ("10.0.0.5:9876"): a list, or one string with `;` between
    them as RocketMQ writes namesrvAddr ("10.0.0.5:9876;10.0.0.6:9876")."""
    if isinstance(value, str):
        value = [entry.strip() for entry in value.split(";") if entry.strip()]
    elif not isinstance(value, list | tuple):
        raise ValueError(f'expected "HOST:PORT;HOST:PORT" or a list of HOST:PORT strings, got {describe_value(value)}')
    addresses = parse_string_list(value)
    for entry in addresses:
        if "," in entry:
            raise ValueError(f"entry {entry!r}: separate addresses with ';', as RocketMQ's namesrvAddr does")
        host, colon, port = entry.rpartition(":")
        if host.startswith("["):
            raise ValueError(
                f"entry {entry!r}: write an IPv6 address without brackets, as RocketMQ does (it splits at the last"
                " ':'), e.g. \"::1:9876\""
            )
        if not colon or not host or any(char.isspace() or char in ";,[]" for char in host):
            problem = "no HOST before the port" if colon and not host else "not HOST:PORT"
            raise ValueError(f'entry {entry!r}: {problem}; write each address as "HOST:PORT", e.g. "10.0.0.5:9876"')
        if not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
            raise ValueError(f"entry {entry!r}: port {port!r} is not a port from 1 to 65535")
    return addresses


def parse_optional_ip_address(value: object) -> str | None:
    """An IPv4 or IPv6 address (clients are told it; pulled messages and offset message ids carry its bytes), or
    None."""
    if value is None:
        return None
    text = parse_string(value).strip()
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        raise ValueError(
            f"{text!r} is not an IP address; give one such as 192.0.2.10 (not a host name: pulled messages and offset"
            " message ids carry it as address bytes)"
        ) from None


def parse_positive_number(value: object) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise ValueError(f"expected a positive number, got {describe_value(value)}")
    if not value > 0:
        raise ValueError(f"{value}: must be a positive number")
    return float(value)


def parse_string(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string (in quotes), got {describe_value(value)}")
    return value


def parse_bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ValueError(f"expected true or false, got {describe_value(value)}")


def parse_optional_bool(value: object) -> bool | None:
    return None if value is None else parse_bool(value)


def parse_flush_mode(value: object) -> FlushMode:
    allowed = " or ".join(mode.value for mode in FlushMode)
    if not isinstance(value, str):
        raise ValueError(f"expected {allowed}, got {describe_value(value)}")
    try:
        return FlushMode(value.strip().upper())
    except ValueError:
        raise ValueError(f"{value!r} is not a flush mode; expected {allowed}") from None


def parse_broker_role(value: object) -> BrokerRole:
    allowed = ", ".join(role.value for role in BrokerRole)
    if not isinstance(value, str):
        raise ValueError(f"expected {allowed}, got {describe_value(value)}")
    try:
        return BrokerRole(value.strip().upper())
    except ValueError:
        raise ValueError(f"{value!r} is not a broker role; expected {allowed}") from None


def parse_non_negative_int(value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"expected an integer, 0 or more, got {describe_value(value)}")
    if value < 0:
        raise ValueError(f"{value}: must be 0 or more")
    return value


def parse_log_level(value: object) -> str:
    allowed = ", ".join(LOG_LEVELS)
    if not isinstance(value, str) or value.strip().upper() not in LOG_LEVELS:
        raise ValueError(f"expected one of {allowed}, got {describe_value(value)}")
    return value.strip().upper()


def format_size(size: int) -> str:
    for unit, factor in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if size % factor == 0:
            return f"{size // factor}{unit}"
    return f"{size}B"


# What each parser takes, as docs/configuration.md names a key's type.
VALUE_TYPES: dict[Parser, str] = {
    parse_size: "size: bytes, or a string with B, KiB, MiB, GiB or TiB",
    parse_positive_int: "integer > 0",
    parse_uint16: "integer 0 to 65535",
    parse_positive_uint16: "integer 1 to 65535",
    parse_port: "port 1 to 65535",
    parse_port_or_zero: "port 0 to 65535 (0: a free one)",
    parse_optional_port: "port 0 to 65535 (0: a free one), or unset",
    parse_optional_string: "string, or unset",
    parse_string_list: "list of strings",
    parse_host_port_list: 'list of "HOST:PORT" strings',
    parse_optional_ip_address: "IP address, or unset",
    parse_positive_number: "number > 0",
    parse_string: "string",
    parse_bool: "boolean",
    parse_optional_bool: "boolean, or unset",
    parse_flush_mode: "ASYNC_FLUSH or SYNC_FLUSH",
    parse_broker_role: "ASYNC_MASTER, SYNC_MASTER or SLAVE",
    parse_non_negative_int: "integer >= 0",
    parse_log_level: ", ".join(LOG_LEVELS),
}
