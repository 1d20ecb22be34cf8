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
    """Names whose two frames differ as multisets, all found by one Spark job (the rows
    collected are names, one per difference).

    Each pair is one aggregation: every row counted +1 on the left and -1 on the right,
    grouped by all its columns; a group whose count is not 0 is a row one side holds more
    often. (Two `exceptAll`s say the same with two aggregations and a row replication each;
    columns are renamed by position, as `exceptAll` compares them.)"""
    parts = []
    for name, (left, right) in pairs.items():
        columns = [f"c{index}" for index in range(len(left.columns))]
        signed = comparable(left).toDF(*columns).withColumn("sign", F.lit(1)).union(
            comparable(right).toDF(*columns).withColumn("sign", F.lit(-1)))
        parts.append(signed.groupBy(*columns).agg(F.sum("sign").alias("count"))
                     .where("count != 0").limit(1).select(F.lit(name).alias("name")))
    return sorted(row.name for row in reduce(DataFrame.union, parts).collect())
