"""A 0.1% delete on a large table: does it write what was deleted, or the files holding it?

`engine/delta/merge.py`'s `apply_changes` applies a step's change (rows inserted, rows
deleted) to a stored Delta table in one commit. Delta Lake's Spark writer does it
with one `MERGE` on tables with deletion vectors, so a deleted row is marked in a
small vector file (and, with the change data feed, written to `_change_data/`);
the delta-rs fallback is copy-on-write, so every data file holding a deleted row
is rewritten. This measures both on the real storage (embedded Spark, default
settings, Delta). Per writer (`engine/delta/storage.py`) a table (id bigint, customer
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
[--writers delta-spark delta-rs] [--rf2] [--unique-by id] [--no-warmup] [--keep]
[--tpch SCALE] [--driver-memory 8g]`;
`--rows 1000000` is a quick run. The tables live in a fresh folder under the system's
temp folder (`--work`), removed afterwards unless `--keep`; 16M rows are 381 MB a
table (about 1.5 GB with `--rf2`: four tables).

`--tpch SCALE` (issue 31: RF2 at TPC-H scale 1 before and after deletion vectors)
runs TPC-H's RF2 instead, on each writer's `orders` and `lineitem`. The data is
`tpch_bench.generate`'s (tpchgen-cli, 1,000 slices of consecutive order keys, cached
under `/tmp/tpch-bench` and shared with `tpch_bench`), the tables' columns those of
`bench/tpch/tables.sql`. Per writer both tables are made by `storage.create(...,
change_feed=True)` and filled by one `storage.append` of all the slices as Spark
reads them (its default partitions, so its default file layout, as a `files`
connector's batch is ingested), then `compact` runs as at the end of every step
(delta-rs only: more than 16 files under 8 MiB become files of ~128 MiB; Delta's
writer keeps Spark's layout). RF2 deletes the orders of slice 1 (0.1%: 1,500 at
SF1) and all their lineitems: per table the rows are read from the stored table
at its version (a semi-join with the slice's order keys) and materialised
(`localCheckpoint`, as a `changes: true` batch is) before the timer; then, timed
separately, `apply_changes` (with an app transaction, as a batch has) and the
step's read of the table's change (`engine/step.py`'s `table_change` itself:
Delta's change data feed on delta-spark, the files that differ compared by
`ZSet.between` on delta-rs), forced by counting its insertions and deletions.
delta-spark runs twice, `distinct=False` (a table without a key, the product's
default: the copies of deleted rows are counted) and `distinct=True` (TPC-H's
primary keys declared), on the same tables restored to the loaded version in
between (outside the timing); delta-rs ignores `distinct`, so it runs once.
Checked with counts only: rows after = rows before - deleted (a Spark count and the
log's), none of RF2's orders left, and the change holds exactly the deleted rows'
count of deletions and no insertion. Printed per writer and variant: apply and
change-read time and bytes written per table, the delete step (both tables, apply
+ change read) against the issue's 62 s (delta-rs' RF2 in a profiled step at SF1,
README) and its goal (<= 0.2x), each `MERGE`'s operationMetrics from the table's
history, and delta-spark's delete step / delta-rs' in the same run. Unless
`--no-warmup`, each writer and variant first runs the same on 50 slices, unmeasured.
`--writers`, `--work`, `--keep` apply; `--rows`, `--files`, `--steps`, `--rf2` and
`--unique-by` do not. Spark gets `--driver-memory` (8g by default with `--tpch`, as
`tpch_bench` has). `python bench/delete_bench.py --tpch 1` takes 10-20 minutes on
2 cores and under 1 GB of temp space at a time.
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
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # pyspark is imported once the path is set up
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql import types as T

    from reconciler.engine.delta.storage import DeltaStorage
    from reconciler.engine.runtime import PipelineRuntime

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.step_bench import file_sizes  # noqa: E402 (after the path is set up)

INSERTED = 10
WARMUP_ROWS = 10_000
PATTERNS = {
    "spread": "N/1000 rows with id % 1000 = 7, in every file",
    "rf2": "N/1000 consecutive ids from the middle, in one or two files",
}

TPCH_DATA = Path("/tmp/tpch-bench")
"""Where `tpch_bench.generate` caches TPC-H's Parquet files (its default `--work`)."""
TPCH_PARTS = 1000
"""Slices of consecutive order keys: RF2 deletes one, 0.1% of the orders."""
RF2_SLICE = 1
TPCH_WARMUP_SLICES = 50
"""Slices of the warm-up's tables: lineitem over 8 MiB, so delta-rs finds the files to
rewrite as on the measured table instead of rewriting the whole table."""
ORDER_KEY = {"orders": "o_orderkey", "lineitem": "l_orderkey"}
BASELINE_SECONDS = 62.0
"""Issue 31's "today": delta-rs' RF2 at SF1 in a profiled step (README, Known
limitations): 38 s for lineitem and 24 s for orders, rewrite and comparison."""
GOAL = 0.2
MERGE_METRICS = ("executionTimeMs", "materializeSourceTimeMs", "scanTimeMs", "rewriteTimeMs",
                 "numTargetRowsDeleted", "numTargetDeletionVectorsAdded",
                 "numTargetFilesAdded", "numTargetChangeFilesAdded", "numTargetBytesAdded")


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

    from reconciler.engine.delta.merge import apply_changes
    from reconciler.engine.delta.relation import DeltaRelation
    from reconciler.engine.delta.storage import DeltaStorage

    schema = T.StructType([T.StructField("id", T.LongType(), False),
                           T.StructField("customer", T.IntegerType()),
                           T.StructField("amount", T.DecimalType(12, 2)),
                           T.StructField("note", T.StringType())])
    storage = DeltaStorage(spark, writer=writer)  # type: ignore[arg-type]  # argparse checked it is a Writer
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
        after_version = apply_changes(DeltaRelation(storage, str(path), version, schema),
                                      inserts, deletes, unique_by=unique_by)
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


def _load_average() -> str:
    return "load average " + " ".join(f"{load:.2f}" for load in os.getloadavg())


def tpch_schemas() -> dict[str, T.StructType]:
    """orders' and lineitem's columns, as `bench/tpch/tables.sql` declares them."""
    from reconciler.desired.parsing.pipeline_sql import SqlSource
    from reconciler.desired.parsing.sql import TableStatement, parse_file
    from reconciler.engine.spark.schema import spark_schema

    text = (ROOT / "bench" / "tpch" / "tables.sql").read_text()
    return {statement.name: spark_schema(statement.columns)
            for statement in parse_file(SqlSource("bench/tpch/tables.sql", text))
            if isinstance(statement, TableStatement) and statement.name in ORDER_KEY}


def _slice_rows(data: Path, table: str, slices: range) -> int:
    """Rows of these generated slices, from their Parquet footers (no rows read)."""
    import pyarrow.parquet as pq

    from bench.tpch_bench import slice_file

    return sum(pq.ParquetFile(slice_file(data, table, part)).metadata.num_rows
               for part in slices)


def tpch_load(spark: SparkSession, storage: DeltaStorage, data: Path, folder: Path,
              slices: range) -> dict[str, dict[str, Any]]:
    """orders and lineitem with these slices, as a pipeline holds them: created with the
    change data feed, one append of the slices as Spark reads them, then the step's
    compaction (delta-rs only). Per table: path, schema, loaded version, rows, files."""
    from bench.tpch_bench import slice_file
    from reconciler.engine.delta.compaction import compact

    tables = {}
    for table, schema in tpch_schemas().items():
        path = folder / table
        storage.create(path, schema, change_feed=True)
        rows = spark.read.schema(schema).parquet(*(str(slice_file(data, table, part))
                                                   for part in slices))
        started = time.perf_counter()
        version = storage.append(path, rows)
        appended = _data_bytes(storage, path)[1]
        compacted = compact(storage, path)
        version = version if compacted is None else compacted
        load_time = time.perf_counter() - started
        expected = _slice_rows(data, table, slices)
        assert storage.row_count(path, version) == expected, (table, expected)
        table_bytes, data_files = _data_bytes(storage, path)
        tables[table] = {"path": path, "schema": schema, "loaded": version, "rows": expected,
                         "appended_files": appended, "files": data_files,
                         "bytes": table_bytes, "load_time": load_time}
    return tables


def _merge_metrics(path: Path, version: int) -> dict[str, int]:
    """The operationMetrics of the `MERGE` that made `version` (delta-spark's commits)."""
    from deltalake import DeltaTable

    for entry in DeltaTable(str(path)).history(8):
        if entry.get("version") == version and entry.get("operation") == "MERGE":
            metrics = entry.get("operationMetrics") or {}
            return {name: int(metrics[name]) for name in MERGE_METRICS if name in metrics}
    return {}


def tpch_rf2(spark: SparkSession, storage: DeltaStorage, data: Path,
             tables: dict[str, dict[str, Any]], distinct: bool,
             app: str) -> dict[str, dict[str, Any]]:
    """RF2 applied to both tables at their loaded version (restored first if a step ran on
    them), each table's apply and change read timed apart, every figure checked by counts."""
    from pyspark.sql import functions as F

    from bench.tpch_bench import slice_file
    from reconciler.engine.delta.merge import apply_changes
    from reconciler.engine.delta.relation import DeltaRelation
    from reconciler.engine.step import table_change
    from reconciler.state.relations import RelationRecord

    keys = (spark.read.parquet(str(slice_file(data, "orders", RF2_SLICE)))
            .select(F.col("o_orderkey").alias("__key")).localCheckpoint(eager=True))
    # `table_change` reads only `runtime.storage`: the step's own code, without a pipeline.
    runtime = cast("PipelineRuntime", SimpleNamespace(storage=storage))
    figures = {}
    for table, info in tables.items():
        path, schema = info["path"], info["schema"]
        version = storage.latest_version(path)
        if version != info["loaded"]:  # an earlier variant's step: undone, untimed
            version = storage.restore(path, info["loaded"])
        assert version is not None

        def doomed(frame: DataFrame, table: str = table) -> DataFrame:
            return frame.join(keys, frame[ORDER_KEY[table]] == keys["__key"], "left_semi")
        deletes = doomed(storage.read(path, version, schema)).localCheckpoint(eager=True)
        deleted = deletes.count()
        assert deleted == _slice_rows(data, table, range(RF2_SLICE, RF2_SLICE + 1)), table

        before = file_sizes(path)
        started = time.perf_counter()
        after = apply_changes(DeltaRelation(storage, str(path), version, schema), None, deletes,
                              app_transaction=(f"{app}:{table}", 1), distinct=distinct)
        apply_time = time.perf_counter() - started
        assert after == version + 1, (table, version, after)
        new = {name: size for name, size in file_sizes(path).items() if name not in before}

        started = time.perf_counter()
        change = table_change(runtime, RelationRecord(str(path), version, schema.json(),
                                                      kind="table"),
                              RelationRecord(str(path), after, schema.json(), kind="table"))
        inserted = 0 if change.inserts is None else change.inserts.count()
        removed = 0 if change.deletes is None else change.deletes.count()
        change_time = time.perf_counter() - started

        stored = storage.read(path, after, schema)
        counted = stored.count()
        assert counted == info["rows"] - deleted, (table, counted, info["rows"] - deleted)
        assert storage.row_count(path, after) == counted, table
        assert doomed(stored).count() == 0, table
        assert (inserted, removed) == (0, deleted), (table, inserted, removed, deleted)
        figures[table] = {"apply": apply_time, "change": change_time, "deleted": deleted,
                          "written": sum(new.values()), "new_files": len(new),
                          "merge": (_merge_metrics(path, after)
                                    if storage.writer.name == "delta-spark" else {})}
    return figures


def run_tpch(spark: SparkSession, scale: float, writers: list[str], work: Path,
             warmup: bool) -> None:
    """Issue 31's benchmark: RF2 on each writer (and variant), printed as it goes, then
    delta-spark's delete step against delta-rs'."""
    from bench.tpch_bench import deletion_file, generate, slice_file
    from reconciler.engine.delta.storage import DeltaStorage

    TPCH_DATA.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    data = generate(TPCH_DATA, scale, TPCH_PARTS)
    rf2_input = {table: deletion_file(slice_file(data, table, RF2_SLICE),
                                      work / "rf2" / f"{table}.parquet")
                 for table in ORDER_KEY}
    print(f"TPC-H SF{scale:g} in {data} ({time.perf_counter() - started:.0f} s); RF2 deletes "
          f"slice {RF2_SLICE} of {TPCH_PARTS}: "
          f"{_slice_rows(data, 'orders', range(RF2_SLICE, RF2_SLICE + 1)):,} orders and "
          f"{_slice_rows(data, 'lineitem', range(RF2_SLICE, RF2_SLICE + 1)):,} lineitems "
          f"(as a changes batch: {rf2_input['orders'] / 1e3:.0f} + "
          f"{rf2_input['lineitem'] / 1e3:.0f} kB); tables in {work}; {_load_average()}",
          flush=True)
    variants = [(writer, distinct) for writer in writers
                for distinct in ((False, True) if writer == "delta-spark" else (False,))]
    if warmup:  # the JVM's first MERGE, rewrite and feed read are not the tables' cost
        started = time.perf_counter()
        for writer in writers:
            storage = DeltaStorage(spark, writer=writer)  # type: ignore[arg-type]  # argparse checked it is a Writer
            tables = tpch_load(spark, storage, data, work / f"warmup-{writer}",
                               range(1, TPCH_WARMUP_SLICES + 1))
            for variant, distinct in variants:
                if variant == writer:
                    tpch_rf2(spark, storage, data, tables, distinct, f"warmup-{distinct}")
        shutil.rmtree(work / "warmup-delta-spark", ignore_errors=True)
        shutil.rmtree(work / "warmup-delta-rs", ignore_errors=True)
        print(f"warm-up on {TPCH_WARMUP_SLICES} slices, unmeasured: "
              f"{time.perf_counter() - started:.0f} s", flush=True)
    totals = {}
    for writer in writers:
        storage = DeltaStorage(spark, writer=writer)  # type: ignore[arg-type]  # argparse checked it is a Writer
        tables = tpch_load(spark, storage, data, work / writer, range(1, TPCH_PARTS + 1))
        print(f"{writer}: loaded " + "; ".join(
            f"{table} {info['rows']:,} rows in {info['files']} files of "
            f"{info['bytes'] / 1e6:.0f} MB in all ({info['appended_files']} appended"
            f"{', then compacted' if info['files'] != info['appended_files'] else ''}; "
            f"{info['load_time']:.0f} s)" for table, info in tables.items()), flush=True)
        for variant, distinct in variants:
            if variant != writer:
                continue
            figures = tpch_rf2(spark, storage, data, tables, distinct, f"bench-{distinct}")
            total = sum(table["apply"] + table["change"] for table in figures.values())
            written = sum(table["written"] for table in figures.values())
            totals[writer, distinct] = total
            name = f"{writer} distinct={distinct}"
            for table, mine in figures.items():
                print(f"{name:<26} {table:<8}: apply {mine['apply']:6.2f} s, change read "
                      f"{mine['change']:6.2f} s; {mine['deleted']:,} rows deleted, wrote "
                      f"{mine['written'] / 1e3:9.1f} kB in {mine['new_files']} files "
                      f"({mine['written'] / rf2_input[table]:.1f}x RF2's input batch)",
                      flush=True)
                if mine["merge"]:
                    print(f"{'':<26} {'':<8}  MERGE: " + ", ".join(
                        f"{key} {value:,}" for key, value in mine["merge"].items()), flush=True)
            verdict = "met" if total <= GOAL * BASELINE_SECONDS else "not met"
            print(f"{name:<26} delete step (both tables, apply + change read) {total:6.2f} s, "
                  f"wrote {written / 1e3:.1f} kB: {total / BASELINE_SECONDS:.3f}x the issue's "
                  f"{BASELINE_SECONDS:.0f} s (goal <= {GOAL}x = {GOAL * BASELINE_SECONDS:.1f} s: "
                  f"{verdict}); {_load_average()}", flush=True)
        shutil.rmtree(work / writer, ignore_errors=True)
    if ("delta-rs", False) in totals:
        for (writer, distinct), total in totals.items():
            if writer == "delta-spark":
                print(f"delta-spark distinct={distinct} delete step / delta-rs delete step "
                      f"(same run) = {total / totals['delta-rs', False]:.3f}")


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
    parser.add_argument("--tpch", type=float, default=None, metavar="SCALE",
                        help="TPC-H's RF2 on orders and lineitem at this scale factor instead "
                        "(issue 31: the delete step against delta-rs' 62 s at SF1)")
    parser.add_argument("--driver-memory", default=None,
                        help="heap of embedded Spark's JVM (default: Spark's; 8g with --tpch)")
    args = parser.parse_args()
    if args.rows < 1000:
        parser.error("--rows: at least 1000 (0.1% of them are deleted)")
    if args.tpch is not None and args.unique_by:
        parser.error("--unique-by: not with --tpch (its tables have no id column)")
    from reconciler.desired.settings.project import SparkSettings
    from reconciler.engine.spark.session import get_spark

    memory = args.driver_memory or ("8g" if args.tpch is not None else None)
    spark = get_spark(SparkSettings(conf={"spark.driver.memory": memory} if memory else {}))
    if args.tpch is not None:
        work = Path(tempfile.mkdtemp(prefix="delete-bench-tpch-", dir=args.work))
        try:
            run_tpch(spark, args.tpch, args.writers, work, not args.no_warmup)
        finally:
            if args.keep:
                print(f"tables kept in {work}")
            else:
                shutil.rmtree(work, ignore_errors=True)
        return
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
