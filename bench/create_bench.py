"""A new table's first write with Delta's writer: created by delta-rs, or by Delta's DDL.

A pipeline's bootstrap creates a Delta table for each table, view and maintained
aggregate's state, then writes into it. A commit delta-rs makes has no version
checksum (`.crc`), so Delta's first write into such a table rebuilds the table's
state from its log in Spark jobs first; a table Delta's own `CREATE TABLE` made
has one. `DeltaSparkWriter.create` uses the DDL where it declares the schema
exactly. This creates `--tables` tables each way through `DeltaStorage` with
Delta's writer on an embedded session (Spark's defaults), appends `--rows` rows
to each and reads them back, and prints the mean seconds per table and the ratio.

Goal: a new table costs at most 0.8x the delta-rs way.

Usage: `python bench/create_bench.py [--tables 8] [--rows 1000]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pyspark.sql import types as T  # noqa: E402

from reconciler.engine.delta.storage import DeltaStorage  # noqa: E402
from reconciler.engine.spark.session import get_spark  # noqa: E402

GOAL = 0.8
SCHEMA = T.StructType([T.StructField("id", T.LongType(), False),
                       T.StructField("name", T.StringType(), True)])


def seconds_per_table(storage: DeltaStorage, create: Callable[[str], object], root: str,
                      tables: int, rows: int) -> float:
    """Mean seconds to create a table, append `rows` rows and count them."""
    spark = storage.spark
    data = spark.range(rows).selectExpr("id", "cast(id as string) as name")
    timings = []
    for index in range(tables):
        path = f"{root}/t{index}"
        started = time.monotonic()
        create(path)
        storage.append(path, data)
        spark.read.format("delta").load(path).count()
        timings.append(time.monotonic() - started)
    return statistics.mean(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=8)
    parser.add_argument("--rows", type=int, default=1000)
    args = parser.parse_args()
    storage = DeltaStorage(get_spark(), writer="delta-spark")
    properties = storage.writer.table_configuration(change_feed=True, deletion_vectors=True)
    ways: dict[str, Callable[[str], object]] = {
        "delta-rs creates": lambda path: storage.create_table(path, SCHEMA, properties),
        "Delta's DDL creates": lambda path: storage.create(path, SCHEMA, change_feed=True),
    }
    with tempfile.TemporaryDirectory() as root:
        seconds_per_table(storage, ways["delta-rs creates"], f"{root}/warm", 1, args.rows)
        result = {name: seconds_per_table(storage, create, f"{root}/{index}", args.tables,
                                          args.rows)
                  for index, (name, create) in enumerate(ways.items())}
    for name, seconds in result.items():
        print(f"{name:20} {seconds:6.2f} s per new table")
    ratio = result["Delta's DDL creates"] / result["delta-rs creates"]
    print(f"ratio {ratio:.2f} (goal at most {GOAL})")
    sys.exit(0 if ratio <= GOAL else 1)


if __name__ == "__main__":
    main()
