"""Comparing views with their queries from scratch (the oracle tests and the TPC-H bench)."""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T


def comparable(frame: DataFrame) -> DataFrame:
    """Doubles to 9 decimals and 10 significant digits: a double summed in another order
    than Spark's (AVG of integers, a SUM of doubles, a VARIANCE from sums of squares) can
    differ in its last bits, and 9 decimals of 5,413,388.696408125 are past what a double
    holds. (`+ 0.0` makes -0.0 the 0.0 Spark's own comparisons take it for.)"""
    return frame.select(*(F.format_string("%.10g", F.round(F.col(f.name), 9) + 0.0).alias(f.name)
                          if isinstance(f.dataType, T.DoubleType) else F.col(f.name)
                          for f in frame.schema.fields))


def differing(pairs: dict[str, tuple[DataFrame, DataFrame]]) -> list[str]:
    """Names whose two frames differ as multisets, found by one aggregation (the rows
    collected are names, one per pair that differs).

    Every row becomes one JSON text (its values compared as `comparable` makes them, NULLs
    written out, columns named by position as `exceptAll` compares them), tagged with its
    pair's name and counted +1 on the left and -1 on the right; a (name, row) whose count
    is not 0 is a row one side holds more often. One text per row lets every pair, whatever
    its columns, share one shuffle: an aggregation per pair would be a Spark job each."""
    parts = []
    for name, (left, right) in pairs.items():
        columns = [f"c{index}" for index in range(len(left.columns))]
        for frame, sign in ((left, 1), (right, -1)):
            parts.append(comparable(frame).toDF(*columns).select(
                F.lit(name).alias("name"),
                F.to_json(F.struct(*columns), {"ignoreNullFields": "false"}).alias("row"),
                F.lit(sign).alias("sign")))
    counts = reduce(DataFrame.union, parts).groupBy("name", "row").agg(
        F.sum("sign").alias("count"))
    return sorted(row.name for row in
                  counts.where("count != 0").select("name").distinct().collect())
