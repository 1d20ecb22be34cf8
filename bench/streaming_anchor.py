"""The engine's maintained step against a hand-written Structured Streaming job doing the same.

Why: a user who runs Spark and Delta Lake already can write the step bench's pipeline
(`bench/step_bench.py`: a filter view, a 20-group aggregate, a join with a 1,000-row
dimension, a view over the aggregate) as one long-running Structured Streaming query.
That job is the anchor a maintained step is judged against (issue 53: the engine's step
at most 0.8x the streaming job's micro-batch on the same shape).

What: the same tables (events with `--rows` rows, users with 1,000) and the same four
views computed once from scratch, twice over, as plain Delta tables for the streaming
job and as a deployed pipeline for the engine (Delta's own writer, `refresh:
incremental`). The streaming query reads the events table from the version after the
initial load, and its `foreachBatch` does what one would write by hand: append the batch's
filtered rows to `big_events` and its joined rows to `by_country` (the views' own SQL
over the batch), MERGE the batch's per-kind count and sum into `by_kind` (matched kinds
updated, new ones inserted, `average` = sum / count), and overwrite `busy_kinds` from
`by_kind`. Each write records the batch as a Delta app transaction (`txnAppId` and
`txnVersion`, Delta's DML settings for the MERGE), so a batch retried after a failure is
written once, as an engine step is; `--no-idempotent` writes without them (an append
then needs no snapshot of its table: 3 Spark jobs fewer each).

Then, in one process and alternately, each round appends the same 1,000 new rows to both
events tables: the streaming side is timed from the append's commit to
`processAllAvailable()`'s return, the engine's from `run_step`'s call to its return.
Two warm-up rounds, then `--steps` timed ones (medians). Spark jobs of each are counted
by the scheduler's job ids: they do not depend on the machine's load, seconds do. The
streaming micro-batch is also broken down by the four writes (seconds and jobs each) and
by the query's own progress durations. At the end each streaming view is compared with
the engine's, as multisets, by `exceptAll` counts both ways (nothing collected but counts).

Usage: `python bench/streaming_anchor.py [--rows 1000000] [--steps 5] [--no-idempotent]`
(`make bench-streaming`).
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.step_bench import SQL, STEP_ROWS, step_events  # noqa: E402

if TYPE_CHECKING:  # pyspark is imported once the session is started
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from reconciler.engine.runtime import PipelineRuntime

VIEWS: dict[str, str] = dict(re.findall(r"create materialized view (\w+) as\s+(.*?);", SQL,
                                        re.S))
"""The step bench's views, by name: the streaming job runs the same SQL."""
assert list(VIEWS) == ["big_events", "by_kind", "by_country", "busy_kinds"], VIEWS
WARM_UP = 2
PARTS = ("big_events", "by_country", "by_kind", "busy_kinds")


def jobs_started(spark: SparkSession) -> int:
    """Jobs the session's scheduler has started, by any thread (its next job id)."""
    return int(spark.sparkContext._jsc.sc().dagScheduler().numTotalJobs())


@dataclass
class Streaming:
    """The hand-written job: its tables' folders, its query, and each batch's breakdown."""

    spark: SparkSession
    paths: dict[str, str]
    query: StreamingQuery | None = None
    idempotent: bool = True
    """Each write records the batch as a Delta app transaction (`txnAppId`, `txnVersion`;
    for the MERGE, Delta's session settings for DML), so a batch run again after a failure
    writes nothing twice: exactly once, as an engine step is."""
    total_type: str = ""
    """`by_kind.total`'s type (SUM's of the amount): a new total is cast back to it, so that
    total / n rounds as Spark's AVG does (its sum in that type, divided by the count)."""
    parts: list[dict[str, tuple[float, int]]] = field(default_factory=list)
    """Per micro-batch, each write's (seconds, Spark jobs) inside `foreachBatch`."""

    def each_batch(self, batch: DataFrame, batch_id: int) -> None:
        """One micro-batch of new events into the four views."""
        spark = batch.sparkSession
        from delta.tables import DeltaTable

        timings: dict[str, tuple[float, int]] = {}

        def timed(part: str, started: float, jobs: int) -> None:
            timings[part] = (time.perf_counter() - started, jobs_started(spark) - jobs)

        def save(frame: DataFrame, target: str, mode: str = "append") -> None:
            writer = frame.write.format("delta").mode(mode)
            if self.idempotent:
                writer = (writer.option("txnAppId", f"anchor-{target}")
                          .option("txnVersion", batch_id))
            writer.save(self.paths[target])

        batch = batch.persist()  # read the batch's files once for the three uses
        batch.createOrReplaceTempView("events")
        spark.read.format("delta").load(self.paths["users"]).createOrReplaceTempView("users")
        for view in ("big_events", "by_country"):  # linear views: the batch's rows appended
            started, jobs = time.perf_counter(), jobs_started(spark)
            save(spark.sql(VIEWS[view]), view)
            timed(view, started, jobs)

        started, jobs = time.perf_counter(), jobs_started(spark)
        partial = spark.sql("select kind, count(*) as n, sum(amount) as total "
                            "from events group by kind")
        total = f"cast(t.total + s.total as {self.total_type})"
        dml = {"spark.databricks.delta.write.txnAppId": "anchor-by_kind",
               "spark.databricks.delta.write.txnVersion": str(batch_id)} if self.idempotent else {}
        for key, value in dml.items():
            spark.conf.set(key, value)
        (DeltaTable.forPath(spark, self.paths["by_kind"]).alias("t")
         .merge(partial.alias("s"), "t.kind = s.kind")
         .whenMatchedUpdate(set={"n": "t.n + s.n", "total": total,
                                 "average": f"{total} / (t.n + s.n)"})
         .whenNotMatchedInsert(values={"kind": "s.kind", "n": "s.n", "total": "s.total",
                                       "average": "s.total / s.n"})
         .execute())
        for key in dml:
            spark.conf.unset(key)
        timed("by_kind", started, jobs)

        started, jobs = time.perf_counter(), jobs_started(spark)
        spark.read.format("delta").load(self.paths["by_kind"]).createOrReplaceTempView("by_kind")
        save(spark.sql(VIEWS["busy_kinds"]), "busy_kinds", mode="overwrite")
        timed("busy_kinds", started, jobs)
        batch.unpersist()
        self.parts.append(timings)

    def start(self, checkpoint: str) -> None:
        """The query, reading the events table from the version after the initial load."""
        self.total_type = (self.spark.read.format("delta").load(self.paths["by_kind"])
                           .schema["total"].dataType.simpleString())
        # "latest": the versions after the table's latest when the query first looks (Delta
        # refuses a number past the latest version); that first look is over when
        # processAllAvailable returns, before anything is appended.
        stream = (self.spark.readStream.format("delta").option("startingVersion", "latest")
                  .load(self.paths["events"]))
        self.query = (stream.writeStream.foreachBatch(self.each_batch)
                      .option("checkpointLocation", checkpoint).start())
        self.query.processAllAvailable()

    def micro_batch(self, start: int) -> tuple[float, int]:
        """Append STEP_ROWS events, then wait for the query to process them: (s, jobs)."""
        assert self.query is not None
        append_events(self.spark, self.paths["events"], start)
        started, jobs = time.perf_counter(), jobs_started(self.spark)
        self.query.processAllAvailable()
        return time.perf_counter() - started, jobs_started(self.spark) - jobs


def append_events(spark: SparkSession, path: str, start: int) -> None:
    step_events(spark, start, STEP_ROWS).write.format("delta").mode("append").save(path)


def users_frame(spark: SparkSession) -> DataFrame:
    """The 1,000 users, as `bench/step_bench.py` writes them."""
    return spark.range(1000).selectExpr("cast(id as int) as id",
                                        "concat('c', cast(id % 30 as string)) as country")


def deploy_streaming(spark: SparkSession, rows: int, folder: Path,
                     idempotent: bool = True) -> Streaming:
    """The tables and the four views from scratch as Delta tables, and the query started."""
    paths = {name: str(folder / name) for name in ("events", "users", *VIEWS)}
    step_events(spark, 0, rows).write.format("delta").save(paths["events"])
    users_frame(spark).write.format("delta").save(paths["users"])
    for table in ("events", "users"):
        spark.read.format("delta").load(paths[table]).createOrReplaceTempView(table)
    for view, query in VIEWS.items():  # in order: busy_kinds reads by_kind
        spark.sql(query).write.format("delta").save(paths[view])
        spark.read.format("delta").load(paths[view]).createOrReplaceTempView(view)
    streaming = Streaming(spark, paths, idempotent=idempotent)
    streaming.start(str(folder / "_checkpoint"))
    return streaming


def deploy_engine(spark: SparkSession, rows: int, root: Path) -> PipelineRuntime:
    """The pipeline deployed as `bench/step_bench.py`'s `run` deploys it, on Delta's writer."""
    from reconciler.engine.bootstrap.recompute import bootstrap
    from reconciler.engine.delta.storage import DeltaStorage
    from reconciler.engine.runtime import PipelineRuntime
    from reconciler.plan.diff import diff_programs
    from reconciler.state.layout import Layout
    from reconciler.state.program import CommittedProgram
    from tests.projects import program_of, write_files

    write_files(root, {"pipelines/bench/pipeline.yaml":
                       "name: bench\nsql: [program.sql]\nrefresh: incremental\n",
                       "pipelines/bench/program.sql": SQL})
    document = program_of(root).document()
    storage = DeltaStorage(spark, writer="delta-spark")
    runtime = PipelineRuntime(spark, storage, Layout(str(root / "state"), "bench"),
                              CommittedProgram.of(document), {},
                              project_dir=root)
    tables_only = {**document, "views": {}, "order": [
        name for name in document["order"] if name in document["tables"]]}
    bootstrap(runtime, diff_programs(None, tables_only), {}, serial=1, silent=True)
    storage.append(runtime.relations["events"].path, step_events(spark, 0, rows))
    storage.append(runtime.relations["users"].path, users_frame(spark))
    for table in ("events", "users"):
        runtime.pin(table, runtime.relation(table).latest())
    bootstrap(runtime, diff_programs(tables_only, document), {}, serial=1, silent=True)
    return runtime


def engine_step(runtime: PipelineRuntime, start: int, serial: int) -> tuple[float, int]:
    """Append STEP_ROWS events, then one maintained step: (seconds, Spark jobs)."""
    from reconciler.engine.step import run_step

    runtime.storage.append(runtime.relations["events"].path,
                           step_events(runtime.spark, start, STEP_ROWS))
    started, jobs = time.perf_counter(), jobs_started(runtime.spark)
    result = run_step(runtime, {}, serial=serial, ingest_inputs=False)
    seconds, jobs = time.perf_counter() - started, jobs_started(runtime.spark) - jobs
    assert result.changed_tables == ["events"], result
    return seconds, jobs


def differences(streaming: Streaming, runtime: PipelineRuntime) -> dict[str, tuple[int, int]]:
    """Per view, rows only in the streaming job's table and rows only in the engine's
    (multisets, `exceptAll`; only the counts reach the driver)."""
    counts: dict[str, tuple[int, int]] = {}
    for view in VIEWS:
        engine = runtime.frame(view)
        mine = (streaming.spark.read.format("delta").load(streaming.paths[view])
                .select(*engine.columns))
        counts[view] = (mine.exceptAll(engine).count(), engine.exceptAll(mine).count())
    return counts


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--idempotent", action=argparse.BooleanOptionalAction, default=True,
                        help="the streaming job's writes as Delta app transactions, exactly "
                             "once as the engine's (default); --no-idempotent: plain writes")
    args = parser.parse_args()
    from reconciler.desired.settings.project import SparkSettings
    from reconciler.engine.spark.session import get_spark

    spark = get_spark(SparkSettings())
    folder = Path(tempfile.mkdtemp(prefix="streaming-anchor-"))
    started = time.perf_counter()
    runtime = deploy_engine(spark, args.rows, folder / "engine")
    streaming = deploy_streaming(spark, args.rows, folder / "streaming", args.idempotent)
    print(f"deployed {args.rows:,} events both ways in {time.perf_counter() - started:.1f} s "
          f"({folder})", flush=True)
    assert streaming.query is not None
    timed: dict[str, list[tuple[float, int]]] = {"streaming": [], "engine": []}
    try:
        for round_ in range(WARM_UP + args.steps):
            start = args.rows + round_ * STEP_ROWS
            # Alternate which side goes first, so neither always follows the other's writes.
            sides = ["streaming", "engine"] if round_ % 2 == 0 else ["engine", "streaming"]
            figures: dict[str, tuple[float, int]] = {}
            for side in sides:
                figures[side] = (streaming.micro_batch(start) if side == "streaming"
                                 else engine_step(runtime, start, serial=round_ + 2))
            label = "warm-up" if round_ < WARM_UP else f"step {round_ - WARM_UP + 1}"
            print(f"{label:>8}: streaming {figures['streaming'][0]:6.2f} s "
                  f"{figures['streaming'][1]:3d} jobs   engine {figures['engine'][0]:6.2f} s "
                  f"{figures['engine'][1]:3d} jobs", flush=True)
            if round_ >= WARM_UP:
                for side in timed:
                    timed[side].append(figures[side])
        progress = [entry for entry in streaming.query.recentProgress
                    if entry["numInputRows"] > 0][-args.steps:]
        idle_jobs = jobs_started(spark)
        time.sleep(5)  # the warm query polling its source with nothing new
        idle_jobs = jobs_started(spark) - idle_jobs
        counts = differences(streaming, runtime)
    finally:
        streaming.query.stop()

    stream_s = median([seconds for seconds, _ in timed["streaming"]])
    engine_s = median([seconds for seconds, _ in timed["engine"]])
    stream_jobs = median([jobs for _, jobs in timed["streaming"]])
    engine_jobs = median([jobs for _, jobs in timed["engine"]])
    print(f"\n{args.rows:,} stored events, {STEP_ROWS:,} new per step, median of {args.steps}:")
    print(f"  streaming micro-batch  {stream_s:6.2f} s  {stream_jobs:5.1f} Spark jobs "
          f"({'idempotent' if args.idempotent else 'plain'} writes)")
    print(f"  engine step            {engine_s:6.2f} s  {engine_jobs:5.1f} Spark jobs "
          "(Delta's writer, refresh: incremental)")
    print(f"  engine / streaming     {engine_s / stream_s:6.2f}x time, "
          f"{engine_jobs / stream_jobs:.2f}x jobs (goal: time <= 0.8x)")
    print("streaming micro-batch by part (median seconds, jobs):")
    for part in PARTS:
        parts = streaming.parts[-args.steps:]
        print(f"  {part:<12} {median([p[part][0] for p in parts]):6.2f} s "
              f"{median([p[part][1] for p in parts]):5.1f} jobs")
    durations = sorted({key for entry in progress for key in entry["durationMs"]})
    print("  query progress (median ms): " + ", ".join(
        f"{key} {median([entry['durationMs'].get(key, 0) for entry in progress]):.0f}"
        for key in durations))
    print(f"  idle query over 5 s: {idle_jobs} Spark jobs")
    print("streaming views against the engine's (rows only in streaming / only in engine):")
    for view, (only_streaming, only_engine) in counts.items():
        print(f"  {view:<12} {only_streaming} / {only_engine}")
    if any(only_streaming or only_engine for only_streaming, only_engine in counts.values()):
        sys.exit(f"the streaming job's views differ from the engine's (kept in {folder})")
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
