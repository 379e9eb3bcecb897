"""The columns of a sink table and the rows built from records.

Columns, in this order: topic, queue_id, queue_offset, keys (array<string>), tags, properties (map<string,string>),
born_timestamp and store_timestamp (timestamps), body (binary), then the `json.schema` fields. The derived
partition column `dt` is the UTC date of store_timestamp as a "YYYY-MM-DD" string. Spark stores partition columns
in directory names, not in the files, and puts them last when it reads a table; `table_schema` lists them so.

Rows cross into Spark with the timestamps as epoch milliseconds (LongType, no per-row conversion in Python);
`to_table` turns them into timestamps in the JVM.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyspark.sql import types as T

from connectors.api import SinkRecord
from spark_sink.errors import SchemaError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

DATE_COLUMN = "dt"
TIMESTAMP_COLUMNS = ("born_timestamp", "store_timestamp")

BASE_FIELDS: tuple[T.StructField, ...] = (
    T.StructField("topic", T.StringType(), False),
    T.StructField("queue_id", T.IntegerType(), False),
    T.StructField("queue_offset", T.LongType(), False),
    T.StructField("keys", T.ArrayType(T.StringType(), False), False),
    T.StructField("tags", T.StringType(), True),
    T.StructField("properties", T.MapType(T.StringType(), T.StringType(), False), False),
    T.StructField("born_timestamp", T.TimestampType(), False),
    T.StructField("store_timestamp", T.TimestampType(), False),
    T.StructField("body", T.BinaryType(), False),
)
BASE_NAMES = tuple(field.name for field in BASE_FIELDS)
_PARTITIONABLE = (T.StringType, T.IntegerType, T.LongType, T.ShortType, T.ByteType, T.BooleanType, T.DateType)

_MS_PER_DAY = 86_400_000


@dataclass(slots=True, frozen=True)
class TableLayout:
    json_schema: T.StructType | None
    partition_columns: tuple[str, ...]

    @classmethod
    def create(cls, json_schema: T.StructType | None, partition_columns: Sequence[str]) -> TableLayout:
        """Checks the JSON field names and the partition columns against each other."""
        json_fields = list(json_schema.fields) if json_schema is not None else []
        for field in json_fields:
            if field.name.lower() in {*BASE_NAMES, DATE_COLUMN}:
                raise SchemaError(f"json.schema: field {field.name!r} clashes with the column of the same name")
        types = {field.name: field.dataType for field in (*BASE_FIELDS, *json_fields)}
        types[DATE_COLUMN] = T.StringType()
        if len(set(partition_columns)) != len(partition_columns):
            raise SchemaError(f"partition.columns: {', '.join(partition_columns)} names a column twice")
        for name in partition_columns:
            if name not in types:
                raise SchemaError(f"partition.columns: no column {name!r}; choose from {', '.join([*types])}")
            if not isinstance(types[name], _PARTITIONABLE):
                raise SchemaError(
                    f"partition.columns: {name!r} is {types[name].simpleString()}; partition by a string, integer, "
                    "boolean or date column"
                )
        if len(partition_columns) == len(types):
            raise SchemaError("partition.columns: at least one column must stay in the files")
        return cls(json_schema, tuple(partition_columns))

    @property
    def has_date(self) -> bool:
        return DATE_COLUMN in self.partition_columns

    def _fields(self) -> list[T.StructField]:
        fields = list(BASE_FIELDS)
        if self.json_schema is not None:
            fields.extend(self.json_schema.fields)
        if self.has_date:
            fields.append(T.StructField(DATE_COLUMN, T.StringType(), False))
        return fields

    def input_schema(self) -> T.StructType:
        """The schema of the rows `row` builds (timestamps as epoch milliseconds)."""
        return T.StructType(
            [
                T.StructField(field.name, T.LongType(), False) if field.name in TIMESTAMP_COLUMNS else field
                for field in self._fields()
            ]
        )

    def table_schema(self) -> T.StructType:
        """The schema a reader gives Spark: the columns in the files, then the partition columns."""
        fields = self._fields()
        by_name = {field.name: field for field in fields}
        partitions = [by_name[name] for name in self.partition_columns]
        return T.StructType([field for field in fields if field.name not in self.partition_columns] + partitions)

    def to_table(self, frame: DataFrame) -> DataFrame:
        from pyspark.sql import functions as F

        return frame.select(
            *[
                F.timestamp_millis(name).alias(name) if name in TIMESTAMP_COLUMNS else F.col(f"`{name}`")
                for name in frame.columns
            ]
        )


class RowBuilder:
    """Turns records into the tuples of `TableLayout.input_schema`; JSON fields come already converted."""

    def __init__(self, layout: TableLayout) -> None:
        self.with_date = layout.has_date
        self._days: dict[int, str] = {}

    def day(self, store_timestamp_ms: int) -> str:
        day = store_timestamp_ms // _MS_PER_DAY
        text = self._days.get(day)
        if text is None:
            if len(self._days) > 10_000:
                self._days.clear()
            text = self._days[day] = (dt.date(1970, 1, 1) + dt.timedelta(days=day)).isoformat()
        return text

    def row(self, record: SinkRecord, json_values: tuple[Any, ...] = ()) -> tuple[Any, ...]:
        base = (
            record.topic,
            record.queue_id,
            record.queue_offset,
            record.keys,
            record.tags,
            record.properties,
            record.born_timestamp_ms,
            record.store_timestamp_ms,
            record.body,
            *json_values,
        )
        return (*base, self.day(record.store_timestamp_ms)) if self.with_date else base
