#!/usr/bin/env python3
"""Reads a Tributary lake with Spark and prints one JSON document: column types, row count,
and the timestamps of the rows (µs since the epoch, by messageId).

usage: spark_read.py <lake dir>
"""
import json
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

spark = (
    SparkSession.builder.master("local[1]")
    .config("spark.ui.enabled", "false")
    .config("spark.sql.session.timeZone", "UTC")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
root = sys.argv[1] + "/events"
df = spark.read.option("basePath", root).option("mergeSchema", "true").parquet(root)
rows = df.select("message_id", F.unix_micros("timestamp").alias("ts"), "app_id", "dt", "hour").collect()
print(json.dumps({
    "types": dict(df.dtypes),
    "count": len(rows),
    "timestamps": {r["message_id"]: r["ts"] for r in rows},
}))
spark.stop()
