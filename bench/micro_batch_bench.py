"""A step of 1,000 rows as its user pays it, four ways side by side in one run (issue 79).

Why: DESIGN.md's cost contract measures a step as the user pays it, the whole `reconcile
run` process and the runner's step, ingest and start-up included, against a recompute and
a hand-written Structured Streaming job on the same shape, in the same run.
`bench/step_bench.py` and `bench/streaming_anchor.py` time the engine's `run_step` inside a
warm process; this bench times what a user waits for, from a file's arrival.

What: `bench/step_bench.py`'s pipeline (events filtered, joined with 1,000 users,
aggregated by kind, a view over the aggregate), events fed by a `files` Parquet connector.
One project holds it three times, each pipeline with an inbox of its own: `p` stepped by
one-shot `reconcile run -p p` processes, `r` by `reconcile run -p r --continuous --interval
S` running throughout, and `full` (`refresh: full`) by one-shot runs. This process runs the
fourth: a Structured Streaming query over its own inbox (Spark's file source, Parquet, the
schema given, a `processingTime` trigger of S) whose `foreachBatch` is
`bench/streaming_anchor.py`'s (append to the filter and join views, MERGE into the
aggregate, overwrite the view over it). All four take the `--rows` load (Parquet files
Spark wrote) as their first step or batch. Then each round the same 1,000 new rows, one
Parquet file, land in each inbox in turn (a hard link: the file appears whole), the order
of the sides rotating every round, each side timed from the file's arrival:

(a) one-shot: the `reconcile run -p p` process, until it exited;
(b) runner: until the runner printed "step committed" (its output read as it comes, each
    line timed on arrival); its wait for the next poll included, nothing subtracted;
(c) streaming: until the batch's writes were done (its progress's `timestamp` plus
    `triggerExecution`); its wait for the next trigger included;
(d) recompute: the `reconcile run -p full` process, as (a).

One warm-up round (the runner's JVM starts in it), then `--steps` timed ones. Printed: per
side the median seconds, Spark jobs (the event logs of the engine's processes: every JVM
of the run logs its events; the scheduler's count for streaming) and the bytes its storage
folder grew by per step (the pipeline's `.reconcile/data/<name>`; the streaming job's
tables and checkpoint) against the input file's; the ratios runner / streaming, one-shot /
recompute (goal at most 0.3) and one-shot / streaming; the load average at start and end.
At the end each streaming view equals each pipeline's as multisets (`exceptAll` counts both
ways, only counts collected).

With `--warm` the one-shot processes (a) and (d) attach to the project's warm server
(`reconcile spark start`, started after the load: docs/concepts.md, "A warm Spark for local
work"), as a user who keeps one running pays a step; their jobs are counted in the
server's event log. The runner keeps a JVM of its own (`--spark-master`).

Usage: `python bench/micro_batch_bench.py [--rows 4000000] [--steps 3] [--interval 1]
[--warm] [--keep]` (`make bench-micro-batch`); `--rows 200000 --steps 2` to try it. Run from a copy
of the tree (`git archive`) to measure a commit while others edit: the CLI runs from here.
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.micro_batch_sides import (  # noqa: E402
    FULL,
    ONE_SHOT,
    RUNNER,
    USERS,
    VIEWS,
    Engine,
    Figures,
    arrive,
    batch_done,
    micro_batch,
    reconcile,
    start_streaming,
    storage_bytes,
    write_project,
)
from bench.step_bench import STEP_ROWS, step_events  # noqa: E402

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SIDES = ("one-shot", "runner", "streaming", "recompute")
EVENT_LOGS = """spark.eventLog.enabled true
spark.eventLog.dir {uri}
spark.eventLog.compress false
spark.eventLog.rolling.enabled false
"""


def load_average() -> str:
    return " ".join(f"{load:.2f}" for load in os.getloadavg())


def write_data(spark: SparkSession, folder: Path, rows: int, rounds: int
               ) -> tuple[list[Path], list[Path]]:
    """The load (Parquet files Spark wrote, one per task) and each round's 1,000 rows (one
    file each), outside every inbox."""
    step_events(spark, 0, rows).write.parquet(str(folder / "load"))
    steps: list[Path] = []
    for number in range(rounds):
        staging = folder / f"step-{number}"
        step_events(spark, rows + number * STEP_ROWS, STEP_ROWS).coalesce(1).write.parquet(
            str(staging))
        steps.extend(staging.glob("part-*.parquet"))
    return sorted((folder / "load").glob("part-*.parquet")), steps


def deploy(engine: Engine, load: list[Path]) -> str:
    """apply, the users of each pipeline, then one `reconcile run` of the three loads."""
    write_project(engine.project)
    reconcile(engine.project, "apply", "--auto-approve")
    for pipeline in (ONE_SHOT, RUNNER, FULL):
        reconcile(engine.project, "execute", "-p", pipeline, USERS)
        for number, part in enumerate(load):
            arrive(part, engine.project / "input" / pipeline, f"load-{number}.parquet")
    said = reconcile(engine.project, "run")
    if said.count("step committed") != 3:
        raise RuntimeError(f"the load: {said}")
    return said


def median(values: list[float] | list[int]) -> float:
    return statistics.median(values)


def budget(written: float, size: int) -> str:
    limit = 20 * size + 200_000
    return (f"bytes per step: {written:,.0f} (input {size:,}; limit 20*Y + 200 kB = "
            f"{limit:,}: {'within' if written <= limit else 'OVER'})")


def compare(spark: SparkSession, engine: Engine, paths: dict[str, str]) -> list[str]:
    """Per pipeline and view, rows only in the streaming job's and only in the pipeline's."""
    differing = []
    for pipeline in (ONE_SHOT, RUNNER, FULL):
        theirs = engine.views(spark, pipeline)
        counts = []
        for view in VIEWS:
            mine = spark.read.format("delta").load(paths[view]).select(*theirs[view].columns)
            only = (mine.exceptAll(theirs[view]).count(), theirs[view].exceptAll(mine).count())
            counts.append(f"{view} {only[0]}/{only[1]}")
            if any(only):
                differing.append(f"{pipeline}.{view}")
        print(f"  streaming against {pipeline:<4}: " + ", ".join(counts), flush=True)
    return differing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000, help="events loaded first")
    parser.add_argument("--steps", type=int, default=3, help="timed rounds after a warm-up")
    parser.add_argument("--interval", type=float, default=1.0,
                        help="the runner's --interval and the streaming trigger, seconds")
    parser.add_argument("--warm", action="store_true",
                        help="the one-shot processes attach to `reconcile spark start`'s "
                             "server (the runner keeps a JVM of its own)")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder")
    args = parser.parse_args()
    loads = [load_average()]
    work = Path(tempfile.mkdtemp(prefix="micro-batch-bench-"))
    conf, logs = work / "spark-conf", work / "event-logs"
    conf.mkdir()
    logs.mkdir()
    (conf / "spark-defaults.conf").write_text(EVENT_LOGS.format(uri=logs.as_uri()))
    os.environ["SPARK_CONF_DIR"] = str(conf)  # every JVM of the run, this one's too
    from reconciler.desired.settings.project import SparkSettings
    from reconciler.engine.spark.session import default_master, get_spark

    spark = get_spark(SparkSettings())
    print(f"{args.rows:,} events, {STEP_ROWS:,} per step, interval {args.interval:g} s; "
          f"load average {loads[0]}; {work}", flush=True)
    started = time.perf_counter()
    load, steps = write_data(spark, work / "data", args.rows, 1 + args.steps)
    print(f"data written ({len(load)} load files): {time.perf_counter() - started:.1f} s",
          flush=True)

    engine = Engine(work / "project", logs)
    started = time.perf_counter()
    said = deploy(engine, load)
    print(f"engine: apply, users, one `reconcile run` loading the 3 pipelines: "
          f"{time.perf_counter() - started:.1f} s", flush=True)
    for line in said.splitlines():
        print(f"  {line}")
    inbox = work / "streaming-inbox"
    inbox.mkdir()
    for number, part in enumerate(load):
        arrive(part, inbox, f"load-{number}.parquet")
    started = time.perf_counter()
    streaming = start_streaming(spark, work / "streaming", inbox, args.interval)
    last, _ = batch_done(streaming, -1, args.rows)
    print(f"streaming: tables created, query started, load batch done: "
          f"{time.perf_counter() - started:.1f} s", flush=True)

    if args.warm:
        started = time.perf_counter()
        print(f"{engine.start_warm()}: {time.perf_counter() - started:.1f} s", flush=True)
    figures = {side: Figures() for side in SIDES}
    own: list[float] = []  # the runner's own figure for its steps
    runner_code: int | None = None
    assert streaming.query is not None
    try:
        started = time.perf_counter()
        engine.start_runner(args.interval, work / "runner.log",
                            default_master() if args.warm else None)
        print(f"runner started, idle: {time.perf_counter() - started:.1f} s", flush=True)
        for round_ in range(1 + args.steps):
            order = SIDES[round_ % len(SIDES):] + SIDES[:round_ % len(SIDES)]
            file, name = steps[round_], f"step-{round_:03d}.parquet"
            done: dict[str, tuple[float, int, int]] = {}
            for side in order:
                if side == "one-shot":
                    done[side] = engine.one_shot(ONE_SHOT, file, name)
                elif side == "recompute":
                    done[side] = engine.one_shot(FULL, file, name)
                elif side == "runner":
                    took, jobs, written, step_seconds = engine.runner_step(file, name)
                    done[side] = (took, jobs, written)
                else:
                    before = storage_bytes(work / "streaming")
                    took, jobs, last = micro_batch(streaming, file, inbox, name, last)
                    done[side] = (took, jobs, storage_bytes(work / "streaming") - before)
            label = "warm-up" if round_ == 0 else f"step {round_}"
            print(f"{label:>8}: " + "   ".join(
                f"{side} {done[side][0]:6.2f} s {done[side][1]:3d} jobs" for side in order),
                flush=True)
            if round_ == 0:
                continue
            own.append(step_seconds)
            for side, (took, jobs, written) in done.items():
                figures[side].seconds.append(took)
                figures[side].jobs.append(jobs)
                figures[side].written.append(written)
        runner_code = engine.stop_runner()
    finally:
        if engine.runner is not None and engine.runner.poll() is None:
            engine.stop_runner()
        streaming.query.stop()
        engine.stop_warm()
    loads.append(load_average())

    size = steps[0].stat().st_size
    seconds = {side: median(figures[side].seconds) for side in SIDES}
    attached = ", warm server" if args.warm else ""
    described = {
        "one-shot": f"one-shot `reconcile run -p {ONE_SHOT}` process{attached}",
        "runner": f"runner step (--interval {args.interval:g}; "
                  f"its own figure {median(own):.2f} s)",
        "streaming": f"streaming micro-batch (processingTime {args.interval:g} s)",
        "recompute": f"full recompute `reconcile run -p {FULL}` process{attached}"}
    print(f"\n{args.rows:,} stored events, {STEP_ROWS:,} new per step, median of "
          f"{args.steps} after 1 warm-up, the sides' order rotating each round:")
    for side in SIDES:
        print(f"  {described[side]:<52} {seconds[side]:7.2f} s {median(figures[side].jobs):5.1f}"
              f" Spark jobs   {budget(median(figures[side].written), size)}")
    print(f"  runner / streaming      {seconds['runner'] / seconds['streaming']:6.2f}x")
    print(f"  one-shot / recompute    {seconds['one-shot'] / seconds['recompute']:6.2f}x "
          "(goal <= 0.3)")
    print(f"  one-shot / streaming    {seconds['one-shot'] / seconds['streaming']:6.2f}x")
    print(f"  load average at start {loads[0]}, at end {loads[1]}")
    print(f"  runner stopped by SIGTERM: exit {runner_code}")
    print("views (rows only in the streaming job's / only in the pipeline's):", flush=True)
    differing = compare(spark, engine, streaming.paths)
    if differing or runner_code != 0:
        sys.exit(f"the views differ: {differing}; runner exit {runner_code} (kept {work})")
    if args.keep:
        print(f"(kept {work})")
    else:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
