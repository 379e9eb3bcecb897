"""Fields parsed from a JSON body into table columns: a parser for the Spark DDL that declares them
(`json.schema`, e.g. "device STRING, temp DOUBLE, tags ARRAY<STRING>") and a strict converter from parsed JSON
to the values Spark takes for those types.

The parser is ours rather than Spark's (`StructType.fromDDL` needs a running JVM) so a config is validated at once,
without starting Spark. It covers the types JSON can carry: STRING, BOOLEAN, TINYINT, SMALLINT, INT, BIGINT,
FLOAT, DOUBLE, DECIMAL(p,s), DATE, TIMESTAMP, ARRAY<t>, MAP<STRING,t> and STRUCT<name: t, ...>.

Conversion is strict, as a schema should be: a field of the wrong JSON type is an error naming the field, not a
silent null. A missing field or a JSON null is null. DATE takes "YYYY-MM-DD"; TIMESTAMP takes an ISO-8601 string
(UTC when it names no offset) or a number of milliseconds since the epoch.
"""

from __future__ import annotations

import datetime as dt
import decimal
import re
from collections.abc import Callable
from typing import Any

from pyspark.sql import types as T

from spark_sink.errors import BadRecordError, SchemaError

_TOKEN = re.compile(r"\s*(?:(`(?:[^`]|``)+`)|([A-Za-z_][A-Za-z0-9_]*)|(\d+)|([<>(),:]))")

_ATOMIC: dict[str, Callable[[], T.DataType]] = {
    "STRING": T.StringType,
    "BOOLEAN": T.BooleanType,
    "TINYINT": T.ByteType,
    "BYTE": T.ByteType,
    "SMALLINT": T.ShortType,
    "SHORT": T.ShortType,
    "INT": T.IntegerType,
    "INTEGER": T.IntegerType,
    "BIGINT": T.LongType,
    "LONG": T.LongType,
    "FLOAT": T.FloatType,
    "REAL": T.FloatType,
    "DOUBLE": T.DoubleType,
    "DATE": T.DateType,
    "TIMESTAMP": T.TimestampType,
}

_INT_RANGES: dict[type[T.DataType], tuple[int, int]] = {
    T.ByteType: (-(2**7), 2**7 - 1),
    T.ShortType: (-(2**15), 2**15 - 1),
    T.IntegerType: (-(2**31), 2**31 - 1),
    T.LongType: (-(2**63), 2**63 - 1),
}


class _Tokens:
    def __init__(self, text: str) -> None:
        self.text = text
        self.items: list[tuple[str, str, int]] = []  # (kind, value, position)
        position = 0
        while position < len(text):
            if text[position:].strip() == "":
                break
            match = _TOKEN.match(text, position)
            if match is None:
                raise SchemaError(f"json.schema: unexpected {text[position:].strip()[:10]!r} at character {position}")
            quoted, word, number, punct = match.groups()
            start = match.start(match.lastindex or 0)
            if quoted is not None:
                self.items.append(("name", quoted[1:-1].replace("``", "`"), start))
            elif word is not None:
                self.items.append(("word", word, start))
            elif number is not None:
                self.items.append(("number", number, start))
            else:
                self.items.append(("punct", punct, start))
            position = match.end()
        self.index = 0

    def peek(self) -> tuple[str, str, int] | None:
        return self.items[self.index] if self.index < len(self.items) else None

    def take(self) -> tuple[str, str, int]:
        token = self.peek()
        if token is None:
            raise SchemaError(f"json.schema: {self.text!r} ends too early")
        self.index += 1
        return token

    def expect(self, punct: str) -> None:
        kind, value, position = self.take()
        if kind != "punct" or value != punct:
            raise SchemaError(f"json.schema: expected {punct!r} at character {position}, found {value!r}")

    def accept(self, punct: str) -> bool:
        token = self.peek()
        if token is not None and token[0] == "punct" and token[1] == punct:
            self.index += 1
            return True
        return False


def parse_ddl(text: str) -> T.StructType:
    """The fields declared by a DDL string such as "device STRING, temp DOUBLE"."""
    tokens = _Tokens(text)
    if tokens.peek() is None:
        raise SchemaError("json.schema: no fields declared")
    fields = _fields(tokens, top_level=True)
    if tokens.peek() is not None:
        raise SchemaError(f"json.schema: unexpected {tokens.peek()[1]!r} at character {tokens.peek()[2]}")  # type: ignore[index]
    return T.StructType(fields)


def _fields(tokens: _Tokens, top_level: bool) -> list[T.StructField]:
    fields: list[T.StructField] = []
    seen: set[str] = set()
    while True:
        kind, name, position = tokens.take()
        if kind not in ("name", "word"):
            raise SchemaError(f"json.schema: expected a field name at character {position}, found {name!r}")
        if name.lower() in seen:
            raise SchemaError(f"json.schema: field {name!r} is declared twice")
        seen.add(name.lower())
        tokens.accept(":")
        fields.append(T.StructField(name, _type(tokens), True))
        if not tokens.accept(","):
            return fields
        if top_level and tokens.peek() is None:
            return fields


def _type(tokens: _Tokens) -> T.DataType:
    kind, word, position = tokens.take()
    upper = word.upper()
    if kind != "word":
        raise SchemaError(f"json.schema: expected a type at character {position}, found {word!r}")
    if upper in _ATOMIC:
        return _ATOMIC[upper]()
    if upper == "DECIMAL":
        precision, scale = 10, 0
        if tokens.accept("("):
            precision = int(tokens.take()[1])
            if tokens.accept(","):
                scale = int(tokens.take()[1])
            tokens.expect(")")
        if not 0 < precision <= 38 or not 0 <= scale <= precision:
            raise SchemaError(f"json.schema: DECIMAL({precision},{scale}) at character {position}: need 0 < p <= 38")
        return T.DecimalType(precision, scale)
    if upper == "ARRAY":
        tokens.expect("<")
        element = _type(tokens)
        tokens.expect(">")
        return T.ArrayType(element, True)
    if upper == "MAP":
        tokens.expect("<")
        key = _type(tokens)
        if not isinstance(key, T.StringType):
            raise SchemaError(
                f"json.schema: MAP at character {position}: JSON object keys are strings; use MAP<STRING, ...>"
            )
        tokens.expect(",")
        value = _type(tokens)
        tokens.expect(">")
        return T.MapType(key, value, True)
    if upper == "STRUCT":
        tokens.expect("<")
        fields = _fields(tokens, top_level=False)
        tokens.expect(">")
        return T.StructType(fields)
    raise SchemaError(
        f"json.schema: unknown or unsupported type {word!r} at character {position}; "
        f"use one of {', '.join(sorted({*_ATOMIC, 'DECIMAL', 'ARRAY', 'MAP', 'STRUCT'}))}"
    )


def converter(schema: T.StructType) -> Callable[[Any], tuple[Any, ...]]:
    """A function from a parsed JSON body to the tuple of field values; raises BadRecordError naming the field."""
    fields = [(field.name, _value_converter(field.dataType, field.name)) for field in schema.fields]

    def convert(document: Any) -> tuple[Any, ...]:
        if not isinstance(document, dict):
            raise BadRecordError(f"body is {_json_kind(document)}, not a JSON object")
        return tuple(convert_value(document.get(name)) for name, convert_value in fields)

    return convert


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _value_converter(data_type: T.DataType, path: str) -> Callable[[Any], Any]:
    def wrong(value: Any, expected: str) -> BadRecordError:
        return BadRecordError(f"field {path!r}: expected {expected}, got {_json_kind(value)} {str(value)[:40]!r}")

    if isinstance(data_type, T.StringType):

        def to_string(value: Any) -> Any:
            if value is None or isinstance(value, str):
                return value
            raise wrong(value, "a string")

        return to_string
    if isinstance(data_type, T.BooleanType):

        def to_bool(value: Any) -> Any:
            if value is None or isinstance(value, bool):
                return value
            raise wrong(value, "true or false")

        return to_bool
    int_range = _INT_RANGES.get(type(data_type))
    if int_range is not None:
        low, high = int_range

        def to_int(value: Any) -> Any:
            if value is None:
                return None
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise wrong(value, f"an integer in [{low}, {high}]")
            return value

        return to_int
    if isinstance(data_type, T.FloatType | T.DoubleType):

        def to_float(value: Any) -> Any:
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise wrong(value, "a number")
            return float(value)

        return to_float
    if isinstance(data_type, T.DecimalType):
        limit = decimal.Decimal(10) ** (data_type.precision - data_type.scale)
        quantum = decimal.Decimal(1).scaleb(-data_type.scale)

        def to_decimal(value: Any) -> Any:
            if value is None:
                return None
            if isinstance(value, bool) or not isinstance(value, int | float | str):
                raise wrong(value, "a decimal number")
            try:
                number = decimal.Decimal(str(value)).quantize(quantum)
            except decimal.InvalidOperation:
                raise wrong(value, "a decimal number") from None
            if not abs(number) < limit:
                raise wrong(value, f"a decimal below {limit}")
            return number

        return to_decimal
    if isinstance(data_type, T.DateType):

        def to_date(value: Any) -> Any:
            if value is None:
                return None
            try:
                return dt.date.fromisoformat(value)
            except (TypeError, ValueError):
                raise wrong(value, "a date YYYY-MM-DD") from None

        return to_date
    if isinstance(data_type, T.TimestampType):

        def to_timestamp(value: Any) -> Any:
            if value is None:
                return None
            try:
                if isinstance(value, int | float) and not isinstance(value, bool):
                    return dt.datetime.fromtimestamp(value / 1000, dt.UTC)
                parsed = dt.datetime.fromisoformat(value)
            except (TypeError, ValueError, OverflowError, OSError):
                raise wrong(value, "an ISO-8601 timestamp or epoch milliseconds") from None
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)

        return to_timestamp
    if isinstance(data_type, T.ArrayType):
        element = _value_converter(data_type.elementType, f"{path}[]")

        def to_list(value: Any) -> Any:
            if value is None:
                return None
            if not isinstance(value, list):
                raise wrong(value, "an array")
            return [element(item) for item in value]

        return to_list
    if isinstance(data_type, T.MapType):
        map_value = _value_converter(data_type.valueType, f"{path}{{}}")

        def to_map(value: Any) -> Any:
            if value is None:
                return None
            if not isinstance(value, dict):
                raise wrong(value, "an object")
            return {key: map_value(item) for key, item in value.items()}

        return to_map
    if isinstance(data_type, T.StructType):
        members = [(field.name, _value_converter(field.dataType, f"{path}.{field.name}")) for field in data_type.fields]

        def to_struct(value: Any) -> Any:
            if value is None:
                return None
            if not isinstance(value, dict):
                raise wrong(value, "an object")
            return tuple(convert_member(value.get(name)) for name, convert_member in members)

        return to_struct
    raise SchemaError(f"json.schema: field {path!r}: type {data_type.simpleString()} is not supported")
