"""A 0.1% delete on a large table: does it write what was deleted, or the files holding it?

`engine/merge.py`'s `apply_changes` applies a step's change (rows inserted, rows
deleted) to a stored Delta table in one commit. Delta Lake's Spark writer does it
with one `MERGE` on tables with deletion vectors, so a deleted row is marked in a
small vector file (and, with the change data feed, written to `_change_data/`);
the delta-rs fallback is copy-on-write, so every data file holding a deleted row
is rewritten. This measures both on the real storage (embedded Spark, default
settings, Delta). Per writer (`engine/storage.py`) a table (id bigint, customer
int, amount decimal(12,2), note string) is made by `storage.create` (with the
change data feed, as a pipeline's tables are) and filled by `storage.append`
with N rows from `spark.range` in `--files` partitions (Spark's default would be
one file per core), then one delete step runs: N/1000 rows spread over the whole
table (`id % 1000 = 7`: every file holds some), read from the stored table at
its version and materialised first (`localCheckpoint`, as a `changes: true`
batch is), plus 10 inserted rows, through `apply_changes` at the table's
version. With `--rf2` a second pattern runs on a fresh table: N/1000 consecutive
ids from the middle of the table (one slice, as TPC-H's RF2 deletes one slice of
order keys: one or two files hold them all). Before the measured steps each writer
runs the same step once on a 10,000-row table, unmeasured, so the first writer does
not pay alone for the JVM's first `MERGE` and first rewrite (`--no-warmup`).
By default the rows are a multiset (`unique_by=()`, as for a pipeline's tables);
`--unique-by id` says rows are unique by `id`, so deletions match on it alone (no
count of the copies that stay on delta-spark, an anti-join instead of `EXCEPT
ALL` on delta-rs).

Measured per step (median of `--steps`; between steps the table is restored to
the filled version, outside the timing): wall time of the `apply_changes` call,
and the bytes it wrote under the table's folder (every new file: data, deletion
vectors, `_change_data/`, `_delta_log/`, Hadoop's `.crc` files). The deleted
rows' bytes are those of the deleted rows written alone as one Parquet file (the
size a `changes: true` input batch of them would have); N/1000 x the table's
average bytes per row is printed beside it. Rows are checked with Spark counts
only: N - N/1000 + 10 rows after the step, none of the deleted ones, all the
inserted ones. Printed per writer and pattern: step time, bytes written, their
ratio to the deleted rows' bytes, and the issue's goal (writes at most 20x the
deleted rows' bytes + 200 kB); then delta-spark's step time / delta-rs' for each
pattern.

Usage: `python bench/delete_bench.py [--rows 16000000] [--files 16] [--steps 1]
[--writers delta-spark delta-rs] [--rf2] [--unique-by id] [--no-warmup] [--keep]`;
`--rows 1000000` is a quick run. The tables live in a fresh folder under the system's
temp folder (`--work`), removed afterwards unless `--keep`; 16M rows are 381 MB a
table (about 1.5 GB with `--rf2`: four tables).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pyspark is imported once the path is set up
    from pyspark.sql import Column, DataFrame, SparkSession

    from reconciler.engine.storage import DeltaStorage

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

INSERTED = 10
WARMUP_ROWS = 10_000
PATTERNS = {
    "spread": "N/1000 rows with id % 1000 = 7, in every file",
    "rf2": "N/1000 consecutive ids from the middle, in one or two files",
}


def file_sizes(folder: Path) -> dict[str, int]:
    """Every file under `folder` with its size (what a step wrote is the new paths)."""
    sizes = {}
    for directory, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(directory, name)
            sizes[path] = os.path.getsize(path)
    return sizes


def _rows(spark: SparkSession, start: int, end: int, partitions: int) -> DataFrame:
    from pyspark.sql import functions as F

    ids = spark.range(start, end, 1, partitions)
    return ids.select(
        F.col("id"),
        (F.col("id") * 7919 % 100_000).cast("int").alias("customer"),
        ((F.col("id") * 37 % 10_000_000) / 100).cast("decimal(12,2)").alias("amount"),
        F.concat(F.lit("order "), F.col("id").cast("string"), F.lit(" of customer "),
                 (F.col("id") * 7919 % 100_000).cast("string")).alias("note"))


def _doomed(pattern: str, rows: int) -> Column:
    from pyspark.sql import functions as F

    if pattern == "spread":
        return F.col("id") % 1000 == 7
    start = rows // 2
    return F.col("id").between(start, start + rows // 1000 - 1)


def _parquet_bytes(frame: DataFrame, folder: Path) -> int:
    """Bytes of `frame` written alone as one Parquet file (Spark's default codec)."""
    frame.coalesce(1).write.mode("overwrite").parquet(str(folder))
    return sum(size for path, size in file_sizes(folder).items()
               if path.endswith(".parquet"))


def _data_bytes(storage: DeltaStorage, path: Path) -> tuple[int, int]:
    """The table's data bytes and number of data files, from its log (no data read)."""
    import pyarrow as pa

    actions = pa.table(storage.require(str(path)).get_add_actions(flatten=True))
    return sum(actions.column("size_bytes").to_pylist()), actions.num_rows


def run(spark: SparkSession, work: Path, writer: str, pattern: str, rows: int, files: int,
        steps: int, unique_by: tuple[str, ...] = ()) -> dict[str, float]:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from reconciler.engine.merge import apply_changes
    from reconciler.engine.storage import DeltaStorage

    schema = T.StructType([T.StructField("id", T.LongType(), False),
                           T.StructField("customer", T.IntegerType()),
                           T.StructField("amount", T.DecimalType(12, 2)),
                           T.StructField("note", T.StringType())])
    storage = DeltaStorage(spark, writer=writer)  # type: ignore[arg-type]
    path = work / f"{writer}-{pattern}"
    storage.create(path, schema, change_feed=True)
    started = time.perf_counter()
    filled = storage.append(path, _rows(spark, 0, rows, files))
    fill_time = time.perf_counter() - started
    table_bytes, data_files = _data_bytes(storage, path)
    assert storage.row_count(path, filled) == rows

    deletes = (storage.read(path, filled, schema).filter(_doomed(pattern, rows))
               .localCheckpoint(eager=True))
    deleted = deletes.count()
    assert deleted == rows // 1000, (deleted, rows // 1000)
    deleted_bytes = _parquet_bytes(deletes, work / f"deleted-{writer}-{pattern}")
    inserts = _rows(spark, rows, rows + INSERTED, 1)

    times, written, new_files = [], [], []
    version = filled
    for step in range(steps):
        if step:  # the same step again, on the filled table's contents
            version = storage.restore(path, filled)
        before = file_sizes(path)
        started = time.perf_counter()
        after_version = apply_changes(storage, path, version, schema, inserts, deletes,
                                      unique_by=unique_by)
        times.append(time.perf_counter() - started)
        assert after_version == version + 1, (version, after_version)
        new = {name: size for name, size in file_sizes(path).items() if name not in before}
        written.append(sum(new.values()))
        new_files.append(len(new))

        stored = storage.read(path, after_version, schema)
        counted = stored.count()
        assert counted == rows - deleted + INSERTED, (counted, rows - deleted + INSERTED)
        assert stored.filter(_doomed(pattern, rows) & (F.col("id") < rows)).count() == 0
        assert stored.filter(F.col("id") >= rows).count() == INSERTED
        assert storage.row_count(path, after_version) == counted
    return {"time": statistics.median(times), "written": statistics.median(written),
            "files": statistics.median(new_files), "deleted_bytes": deleted_bytes,
            "average_bytes": table_bytes / rows * deleted, "table_bytes": table_bytes,
            "data_files": data_files, "fill_time": fill_time}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=16_000_000)
    parser.add_argument("--files", type=int, default=16,
                        help="partitions of spark.range, so data files of the filled table")
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--writers", nargs="+", default=["delta-spark", "delta-rs"],
                        choices=["delta-spark", "delta-rs"])
    parser.add_argument("--rf2", action="store_true",
                        help="also delete one slice of consecutive ids (on a fresh table)")
    parser.add_argument("--unique-by", nargs="*", default=[], choices=["id"],
                        help="pass unique_by=('id',): deletions match on the key alone")
    parser.add_argument("--no-warmup", action="store_true",
                        help=f"skip the unmeasured step on {WARMUP_ROWS:,} rows per writer first")
    parser.add_argument("--work", type=Path, default=None,
                        help="parent of the bench's fresh folder (default: the temp folder)")
    parser.add_argument("--keep", action="store_true", help="keep the tables afterwards")
    args = parser.parse_args()
    if args.rows < 1000:
        parser.error("--rows: at least 1000 (0.1% of them are deleted)")
    from reconciler.engine.session import get_spark
    from reconciler.spec.project import SparkSettings

    spark = get_spark(SparkSettings())
    patterns = ["spread", "rf2"] if args.rf2 else ["spread"]
    work = Path(tempfile.mkdtemp(prefix="delete-bench-", dir=args.work))
    print(f"{args.rows:,} rows in {args.files} files, {args.rows // 1000:,} deleted and "
          f"{INSERTED} inserted per step, median of {args.steps}, unique_by="
          f"{tuple(args.unique_by)}; tables in {work}", flush=True)
    results: dict[tuple[str, str], dict[str, float]] = {}
    try:
        if not args.no_warmup:  # the JVM's first MERGE and rewrite are not the table's cost
            for writer in args.writers:
                run(spark, work / "warmup", writer, "spread", WARMUP_ROWS, 2, 1,
                    tuple(args.unique_by))
            shutil.rmtree(work / "warmup", ignore_errors=True)
        for pattern in patterns:
            for writer in args.writers:
                results[writer, pattern] = figures = run(spark, work, writer, pattern,
                                                         args.rows, args.files, args.steps,
                                                         tuple(args.unique_by))
                budget = 20 * figures["deleted_bytes"] + 200_000
                ratio = figures["written"] / figures["deleted_bytes"]
                print(f"{writer:<11} {pattern:<6}: table {figures['table_bytes'] / 1e6:.1f} MB "
                      f"in {figures['data_files']} files (filled in {figures['fill_time']:.1f} s); "
                      f"step {figures['time']:6.2f} s, wrote "
                      f"{figures['written'] / 1e3:9.1f} kB in {figures['files']:.0f} files for "
                      f"{figures['deleted_bytes'] / 1e3:.1f} kB of deleted rows as Parquet "
                      f"({figures['average_bytes'] / 1e3:.1f} kB at the table's bytes per row): "
                      f"{ratio:.1f}x (budget 20x + 200 kB = {budget / 1e3:.0f} kB: "
                      f"{'ok' if figures['written'] <= budget else 'over'})", flush=True)
    finally:
        if args.keep:
            print(f"tables kept in {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if set(args.writers) == {"delta-spark", "delta-rs"}:
        for pattern in patterns:
            ratio = (results["delta-spark", pattern]["time"]
                     / results["delta-rs", pattern]["time"])
            print(f"{pattern} ({PATTERNS[pattern]}): delta-spark step / delta-rs step = "
                  f"{ratio:.2f}")


if __name__ == "__main__":
    main()
