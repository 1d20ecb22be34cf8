"""Step cost with incremental maintenance: does a step cost what changed, or what is stored?

A pipeline with a filter view, a 20-group aggregate, a join with a 1,000-row
dimension and a view over the aggregate. Its fact table holds N rows (1M and
16M by default, written by Spark straight into the table's Delta folder), the
views are computed once (a deploy), then each step adds 1,000 new rows and runs
`run_step` through the real engine (embedded Spark, default settings, Delta).
Measured per step (median of `--steps`): wall time, and bytes written under
the pipeline's storage (new data and log files) next to the input's own bytes
(the appended Parquet files).

Printed for `refresh: incremental` (the default), `refresh: full` (every
view recomputed each step) and `refresh: auto` (each view's way chosen per step,
`engine/maintenance/refresh_choice.py`), with the goals of the incremental-maintenance issues:
step time at the largest N at most 1.3x the time at the smallest, and bytes
written per step at most 20x the input's bytes + 200 kB; and for each Delta
writer (Delta Lake's Spark writer and the delta-rs fallback, `engine/delta/storage.py`),
with the ratio of their step times at the largest N (goal: delta-spark at most
1.2x the delta-rs path); and an `auto` step at the largest N at most 0.05x a
recompute's.

Usage: `python bench/step_bench.py [--rows 1000000 16000000] [--steps 3]
[--writers delta-spark delta-rs] [--refresh incremental full auto]`.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pyspark is imported once the path is set up
    from pyspark.sql import DataFrame, SparkSession

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SQL = """
create table events (id bigint not null, user_id int, kind string, amount decimal(10,2), day date);
create table users (id int not null, country string);
create materialized view big_events as
  select id, user_id, amount from events where amount > 500;
create materialized view by_kind as
  select kind, count(*) as n, sum(amount) as total, avg(amount) as average
  from events group by kind;
create materialized view by_country as
  select e.id, u.country, e.amount from events e join users u on e.user_id = u.id;
create materialized view busy_kinds as select kind, total from by_kind where n > 10;
"""
STEP_ROWS = 1000


def file_sizes(folder: Path) -> dict[str, int]:
    """Every file under `folder` with its size (what a step wrote is the new paths)."""
    sizes = {}
    for directory, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(directory, name)
            sizes[path] = os.path.getsize(path)
    return sizes


def step_events(spark: SparkSession, start: int, rows: int) -> DataFrame:
    from pyspark.sql import functions as F

    ids = spark.range(start, start + rows)
    return ids.select(
        F.col("id"),
        (F.col("id") % 1000).cast("int").alias("user_id"),
        F.concat(F.lit("kind"), (F.col("id") % 20).cast("string")).alias("kind"),
        ((F.col("id") * 37 % 100000) / 100).cast("decimal(10,2)").alias("amount"),
        F.date_add(F.lit("2026-01-01").cast("date"), (F.col("id") % 365).cast("int")).alias("day"))


def run(spark: SparkSession, rows: int, refresh: str, steps: int,
        writer: str) -> dict[str, float]:
    from reconciler.engine.bootstrap.recompute import bootstrap
    from reconciler.engine.delta.storage import DeltaStorage
    from reconciler.engine.runtime import PipelineRuntime
    from reconciler.engine.step import run_step
    from reconciler.plan.diff import diff_programs
    from reconciler.state.layout import Layout
    from reconciler.state.program import CommittedProgram
    from tests.projects import program_of, write_files

    root = Path(tempfile.mkdtemp(prefix="step-bench-"))
    write_files(root, {"pipelines/bench/pipeline.yaml":
                       f"name: bench\nsql: [program.sql]\nrefresh: {refresh}\n",
                       "pipelines/bench/program.sql": SQL})
    document = program_of(root).document()
    storage = DeltaStorage(spark, writer=writer)  # type: ignore[arg-type]  # argparse checked it is a Writer
    runtime = PipelineRuntime(spark, storage, Layout(str(root / "state"), "bench"),
                              CommittedProgram.of(document), {},
                              project_dir=root)
    tables_only = {**document, "views": {}, "order": [
        name for name in document["order"] if name in document["tables"]]}
    bootstrap(runtime, diff_programs(None, tables_only), {}, serial=1,
              silent=True)
    storage.append(runtime.relations["events"].path, step_events(spark, 0, rows))
    users = spark.range(1000).selectExpr("cast(id as int) as id",
                                         "concat('c', cast(id % 30 as string)) as country")
    storage.append(runtime.relations["users"].path, users)
    for table in ("events", "users"):
        runtime.pin(table, runtime.relation(table).latest())
    # The views, computed from the tables' state as a bootstrap that adds them does.
    bootstrap(runtime, diff_programs(tables_only, document), {}, serial=1,
              silent=True)
    assert (runtime.relations["big_events"].rows or 0) > rows // 3
    times, written, inputs = [], [], []
    for step in range(steps):
        before = file_sizes(root / "state")
        version = storage.append(runtime.relations["events"].path,
                                 step_events(spark, rows + step * STEP_ROWS, STEP_ROWS))
        appended = {path: size for path, size in file_sizes(root / "state").items()
                    if path not in before}
        started = time.perf_counter()
        result = run_step(runtime, {}, serial=step + 2, ingest_inputs=False)
        times.append(time.perf_counter() - started)
        assert result.changed_tables == ["events"] and version is not None
        after = file_sizes(root / "state")
        written.append(sum(size for path, size in after.items()
                           if path not in before and path not in appended))
        inputs.append(sum(appended.values()))
    return {"time": statistics.median(times), "written": statistics.median(written),
            "input": statistics.median(inputs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 16_000_000])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--writers", nargs="+", default=["delta-spark", "delta-rs"],
                        choices=["delta-spark", "delta-rs"])
    parser.add_argument("--refresh", nargs="+", default=["incremental", "full", "auto"],
                        choices=["incremental", "full", "auto"])
    args = parser.parse_args()
    from reconciler.desired.settings.project import SparkSettings
    from reconciler.engine.spark.session import get_spark

    spark = get_spark(SparkSettings())
    results: dict[tuple[str, str, int], dict[str, float]] = {}
    for writer in args.writers:
        for refresh in args.refresh:
            for rows in args.rows:
                results[writer, refresh, rows] = figures = run(spark, rows, refresh, args.steps,
                                                               writer)
                budget = 20 * figures["input"] + 200_000
                print(f"{writer:<11} refresh {refresh:<11} {rows:>11,} rows: step "
                      f"{figures['time']:6.2f} s, wrote {figures['written'] / 1e3:9.1f} kB for "
                      f"{figures['input'] / 1e3:.1f} kB of input (budget {budget / 1e3:.0f} kB: "
                      f"{'ok' if figures['written'] <= budget else 'over'})", flush=True)
    small, large = min(args.rows), max(args.rows)
    for writer in args.writers:
        for refresh in args.refresh:
            ratio = (results[writer, refresh, large]["time"]
                     / results[writer, refresh, small]["time"])
            print(f"{writer} refresh {refresh}: step time at {large:,} / at {small:,} rows = "
                  f"{ratio:.2f} (goal for incremental: <= 1.3)")
        if "full" not in args.refresh:
            continue
        for refresh in {"incremental", "auto"} & set(args.refresh):
            share = (results[writer, refresh, large]["time"]
                     / results[writer, "full", large]["time"])
            print(f"{writer}: at {large:,} rows a refresh: {refresh} step takes {share:.3f}x "
                  f"a recompute's time{' (goal <= 0.05)' if refresh == 'auto' else ''}")
    if set(args.writers) == {"delta-spark", "delta-rs"}:
        for refresh in args.refresh:
            ratio = (results["delta-spark", refresh, large]["time"]
                     / results["delta-rs", refresh, large]["time"])
            print(f"refresh {refresh} at {large:,} rows: delta-spark step / delta-rs step = "
                  f"{ratio:.2f} (goal <= 1.2)")


if __name__ == "__main__":
    main()
