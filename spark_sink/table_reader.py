"""Reading a sink table back with Spark, with the schema the sink recorded in its manifest.

Spark infers the types of partition columns from directory names (a `dt=2026-11-22` comes back as a date, a
`queue_id=3` as an int even if it was declared otherwise); the recorded schema keeps them as written.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pyspark.sql import types as T

from spark_sink.errors import TableStateError
from spark_sink.table_commit import read_manifest

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def table_schema(path: str | Path) -> T.StructType:
    manifest = read_manifest(Path(path))
    if manifest.schema is None:
        raise TableStateError(f"{path}: no batch committed yet, so no schema; has the Spark sink written here?")
    return T.StructType.fromJson(manifest.schema)


def read_table(spark: SparkSession, path: str | Path) -> DataFrame:
    """The table at `path` as a DataFrame (every committed row; the sink's `_mqgate/` directory is not read)."""
    return spark.read.schema(table_schema(path)).parquet(str(path))
