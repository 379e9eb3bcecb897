"""A DataFrame from rows held in the driver, without PySpark's per-field coercion.

`SparkSession.createDataFrame(rows, schema)` passes every field of every row through a Python converter (each
string through `str()`, each map and array rebuilt) before pickling the rows to the JVM: 60% of its time for our
rows, which `table_schema.RowBuilder` and `json_fields` already build with exactly the schema's types. This does
the rest of what createDataFrame does for a local list (PySpark 4.3's `_create_dataframe`): `toInternal` where
the schema needs it (timestamps, dates, decimals and structs of JSON fields), `parallelize`, and the JVM's
`applySchemaToPythonRDD`. Should those internals move in another PySpark, it falls back to createDataFrame.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from pyspark.sql import types as T

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

_fallback = False


def data_frame(session: SparkSession, rows: list[tuple[Any, ...]], schema: T.StructType) -> DataFrame:
    """`rows` (tuples of exactly `schema`'s field types, in its order) as a DataFrame."""
    global _fallback
    if not _fallback:
        try:
            from pyspark.sql import DataFrame

            if schema._needSerializeAnyField:
                rows = [schema.toInternal(row) for row in rows]
            rdd = session.sparkContext.parallelize(rows)
            jvm: Any = session._jvm
            java_rows = jvm.SerDeUtil.toJavaArray(rdd._to_java_object_rdd())
            java_frame = session._jsparkSession.applySchemaToPythonRDD(java_rows.rdd(), schema.json())
            frame = DataFrame(java_frame, session)
            frame._schema = schema
            return frame
        except AttributeError as exc:
            log.warning("PySpark internals changed (%s); using createDataFrame, which is slower", exc)
            _fallback = True
    return session.createDataFrame(rows, schema, verifySchema=False)
