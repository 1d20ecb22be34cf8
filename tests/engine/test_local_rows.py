"""Rows the driver holds reach Spark as Arrow (`engine.local_rows`): typed as asked, and an
empty frame is a local scan, not a Python RDD whose first job starts Python workers."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from reconciler.engine.spark.local_rows import empty_frame, local_frame

SCHEMA = T.StructType([T.StructField("id", T.LongType(), False),
                       T.StructField("price", T.DecimalType(10, 2)),
                       T.StructField("day", T.DateType())])


def test_rows_keep_their_types_and_nullability(spark: SparkSession) -> None:
    rows = [(1, Decimal("5.10"), dt.date(2026, 1, 3)), (2, None, None)]
    frame = local_frame(spark, rows, SCHEMA)
    assert frame.schema == SCHEMA
    assert sorted(tuple(row) for row in frame.collect()) == rows  # the two rows just sent


def test_an_empty_frame_is_a_local_scan(spark: SparkSession) -> None:
    frame = empty_frame(spark, SCHEMA)
    plan = frame._jdf.queryExecution().executedPlan().toString()
    assert plan.startswith("LocalTableScan"), plan
    assert "ExistingRDD" in spark.createDataFrame([], SCHEMA)._jdf.queryExecution(
        ).executedPlan().toString()  # what the list path would have been
    assert frame.count() == 0 and frame.schema == SCHEMA
