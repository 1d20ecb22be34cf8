"""What a table change costs when the table evolves in place, against rebuilding it.

A table of N rows (written by Spark straight into its Delta folder) with three
views: one reads the column that changes, one does not, one counts rows. Each
change is planned (`diff_programs`) and bootstrapped through the real engine
(embedded Spark, default settings, delta-rs commits), and measured: wall time,
bytes of new files under the pipeline's storage (hard links to existing data
files are not new bytes), and which views were recomputed. Next to each, the
Feldera way: the table emptied and all N rows ingested again, every reader
recomputed (`rebuild`).

Changes: a nullable column added (a metadata-only commit), a DECIMAL widened
(a rewrite with a cast), and the table renamed (its folder moved: data files
hard-linked, nothing recomputed).

Usage: `python bench/evolve_bench.py [--rows 1000000 8000000]`.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SQL = """
create table events (id bigint not null, kind string, amount decimal(10,2));
create materialized view totals as select kind, sum(amount) as total from events group by kind;
create materialized view kinds as select distinct kind from events;
create materialized view counted as select count(*) as n from events;
"""
CHANGES = {
    "add a nullable column": SQL.replace("amount decimal(10,2))",
                                         "amount decimal(10,2), note string)"),
    "widen a DECIMAL": SQL.replace("decimal(10,2)", "decimal(14,2)"),
    "rename the table": SQL.replace("table events", "table facts").replace("from events",
                                                                           "from facts"),
}


def _new_bytes(folder: Path, before: set[int]) -> int:
    """Bytes of files whose inode did not exist before (a hard link is not a new file)."""
    total = 0
    for directory, _, files in os.walk(folder):
        for name in files:
            info = os.stat(os.path.join(directory, name))
            if info.st_ino not in before:
                total += info.st_size
    return total


def _inodes(folder: Path) -> set[int]:
    return {os.stat(os.path.join(d, f)).st_ino for d, _, fs in os.walk(folder) for f in fs}


def _events(spark: SparkSession, rows: int) -> DataFrame:
    from pyspark.sql import functions as F

    return spark.range(rows).select(
        F.col("id"), F.concat(F.lit("kind"), (F.col("id") % 20).cast("string")).alias("kind"),
        ((F.col("id") * 37 % 100000) / 100).cast("decimal(10,2)").alias("amount"))


def _deploy(spark: SparkSession, rows: int) -> tuple[Any, Path, dict[str, Any]]:
    from reconciler.engine.bootstrap.recompute import bootstrap
    from reconciler.engine.delta.storage import DeltaStorage
    from reconciler.engine.runtime import PipelineRuntime
    from reconciler.plan.diff import diff_programs
    from reconciler.state.layout import Layout
    from reconciler.state.program import CommittedProgram
    from tests.projects import program_of, write_files

    root = Path(tempfile.mkdtemp(prefix="evolve-bench-"))
    write_files(root, {"pipelines/bench/pipeline.yaml": "name: bench\n",
                       "pipelines/bench/program.sql": SQL})
    document = program_of(root).document()
    storage = DeltaStorage(spark)
    runtime = PipelineRuntime(spark, storage, Layout(str(root / "state"), "bench"),
                              CommittedProgram.of(document), {},
                              project_dir=root)
    tables_only = {**document, "views": {}, "order": ["events"]}
    bootstrap(runtime, diff_programs(None, tables_only), {}, serial=1, silent=True)
    storage.append(runtime.relations["events"].path, _events(spark, rows))
    runtime.pin("events", runtime.relation("events").latest())
    bootstrap(runtime, diff_programs(tables_only, document), {}, serial=1,
              silent=True)
    return runtime, root, document


def change(spark: SparkSession, rows: int, sql: str) -> dict[str, Any]:
    from reconciler.engine.bootstrap.recompute import bootstrap
    from reconciler.plan.diff import diff_programs
    from reconciler.state.program import CommittedProgram
    from tests.projects import program_of, write_files

    runtime, root, document = _deploy(spark, rows)
    write_files(root, {"pipelines/bench/program.sql": sql})
    desired = program_of(root).document()
    diff = diff_programs(document, desired)
    runtime.program = CommittedProgram.of(desired)
    before = _inodes(root / "state")
    started = time.perf_counter()
    result = bootstrap(runtime, diff, {}, serial=2, silent=True)
    return {"time": time.perf_counter() - started, "written": _new_bytes(root / "state", before),
            "recomputed": result.recomputed}


def rebuild(spark: SparkSession, rows: int) -> dict[str, Any]:
    """Feldera's way: the table emptied, its rows ingested again, every reader recomputed."""
    runtime, root, _ = _deploy(spark, rows)
    before = _inodes(root / "state")
    started = time.perf_counter()
    runtime.create_table("events")
    runtime.storage.append(runtime.relations["events"].path, _events(spark, rows))
    runtime.pin("events", runtime.relation("events").latest())
    for view in ("totals", "kinds", "counted"):
        runtime.write_view(view, runtime.evaluate(view))
    return {"time": time.perf_counter() - started, "written": _new_bytes(root / "state", before),
            "recomputed": ["totals", "kinds", "counted"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 8_000_000])
    args = parser.parse_args()
    from reconciler.desired.settings.project import SparkSettings
    from reconciler.engine.spark.session import get_spark

    spark = get_spark(SparkSettings())
    for rows in args.rows:
        baseline = rebuild(spark, rows)
        print(f"{rows:>11,} rows  rebuild (truncate + re-ingest): {baseline['time']:6.2f} s, "
              f"wrote {baseline['written'] / 1e6:8.2f} MB, recomputed all 3 views", flush=True)
        for name, sql in CHANGES.items():
            figures = change(spark, rows, sql)
            print(f"{rows:>11,} rows  {name:<22}: {figures['time']:6.2f} s "
                  f"({figures['time'] / baseline['time']:.2f}x rebuild), wrote "
                  f"{figures['written'] / 1e6:8.2f} MB, recomputed "
                  f"{', '.join(figures['recomputed']) or 'nothing'}", flush=True)


if __name__ == "__main__":
    main()
