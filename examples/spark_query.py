"""Messages per device per hour, from a table the Spark sink wrote, with Spark SQL.

    python examples/spark_query.py /srv/lake/telemetry [--master local[2]] [--since 2026-11-01]

The device is the second level of the MQTT topic a message was published under (`MQTT_TOPIC`, e.g.
`sensors/d17/temp` -> `d17`); messages that did not come through MQTT have no such property and are left out.
The table is read with the schema the sink recorded, so `dt` stays a string and `--since` prunes partitions.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

from pyspark.sql import SparkSession

from spark_sink.table_reader import read_table

QUERY = """
SELECT element_at(split(properties['MQTT_TOPIC'], '/'), 2) AS device,
       date_trunc('HOUR', store_timestamp)                AS hour,
       count(*)                                           AS messages
FROM messages
WHERE properties['MQTT_TOPIC'] IS NOT NULL AND dt >= :since
GROUP BY 1, 2
ORDER BY hour, device
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("table", help="the sink's `path`")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--since", default="0000-00-00", help="first day (YYYY-MM-DD, UTC) to count")
    args = parser.parse_args()
    spark = (
        SparkSession.builder.master(args.master)
        .appName("mqgate-spark-query")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    try:
        read_table(spark, args.table).createOrReplaceTempView("messages")
        rows = spark.sql(QUERY, args={"since": args.since}).collect()
        print(f"{'hour (UTC)':<20} {'device':<24} {'messages':>10}")
        for row in rows:
            print(f"{row.hour:%Y-%m-%d %H:00}     {row.device:<24} {row.messages:>10}")
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
