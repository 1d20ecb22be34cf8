"""Where one TPC-H refresh step's time goes, per view: wall time and Spark jobs.

`bench/tpch_bench.py` answers "how long"; this answers "on what". It loads the
TPC-H tables (all slices but the first and last) and computes the 22 views once
(the data from `tpch_bench.generate`, the state kept under `--work`), then each run
restores that state and runs one step through the real engine: `rf1` adds the last
slice of orders and lineitems, `rf2` deletes the first through the `changes: true`
connectors. It prints each refreshed view's time and the number and summed
duration of the Spark jobs it ran (each view's jobs carry its name as their job
group; durations come from the Spark UI's REST API), slowest first.

Usage: `python bench/tpch_profile.py rf1 [--scale 1] [--parts 1000]`. Wrap it in
`py-spy record --idle` for the driver's Python side; for the JVM's, `jcmd <pid>
JFR.start` / `JFR.dump` (Java Flight Recorder) around the step.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import shutil
import sys
import time
import urllib.request
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.tpch_bench import (  # noqa: E402 (after the path is set up)
    SLICED,
    Timer,
    deletion_file,
    generate,
    load,
    slice_file,
)

WARM_UP = ("q1", "q9", "q13", "q21")
"""Views computed (written nowhere) before the step, so that the JIT has compiled some of
Spark's hot paths (RF2's views at scale 1: 60 s after it, 67 s without). The figures stay
above `tpch_bench`'s, whose steps follow the load and each other in one warm JVM."""


def prepare(spark: Any, data: Path, root: Path, parts: int) -> None:
    """The pipeline's state with every table loaded and every view computed, once."""
    runtime, connectors = load(spark, data, root, "incremental", range(2, parts), Timer())
    (root / "saved.pickle").write_bytes(pickle.dumps((runtime.program, runtime.relations,
                                                      connectors)))


def profile(spark: Any, data: Path, root: Path, kind: str, parts: int) -> None:
    """One step on a copy of the prepared state, each view's jobs in its own job group."""
    import reconciler.engine.refresh as refresh
    from reconciler.engine.runtime import PipelineRuntime
    from reconciler.engine.step import run_step
    from reconciler.engine.storage import DeltaStorage
    from reconciler.layout import Layout

    document, relations, connectors = pickle.loads((root / "saved.pickle").read_bytes())
    timer = Timer()
    runtime = PipelineRuntime(spark, DeltaStorage(spark), Layout(str(root / "state"), "tpch"),
                              document, relations, report=timer)
    refresh_view = refresh.refresh_view

    def grouped(runtime: PipelineRuntime, frames: Any, view: str) -> Any:
        spark.sparkContext.setJobGroup(view, view)  # per thread: the refresh's worker
        return refresh_view(runtime, frames, view)

    refresh.refresh_view = grouped
    for table in SLICED:
        if kind == "rf1":
            source = slice_file(data, table, parts)
            os.link(source, root / "input" / table / source.name)
        else:
            deletion_file(slice_file(data, table, 2),
                          root / "input" / f"{table}_rf2" / "delete.parquet")
    for view in WARM_UP:  # a JVM's first queries run interpreted: warm it as a service is
        runtime.evaluate(view).write.format("noop").mode("overwrite").save()
    context = spark.sparkContext
    url = f"{context.uiWebUrl}/api/v1/applications/{context.applicationId}/jobs"
    earlier = {job["jobId"] for job in json.load(urllib.request.urlopen(url))}
    started = time.perf_counter()
    run_step(runtime, connectors, serial=4, base_dir=root)
    print(f"{kind}: step {time.perf_counter() - started:.1f} s, views refreshed in "
          f"{timer.phase():.1f} s")
    jobs: dict[str, list[float]] = defaultdict(list)
    for job in json.load(urllib.request.urlopen(url)):
        if job["jobId"] not in earlier:  # the step's only: not the load's, not the warm-up's
            jobs[job.get("jobGroup", "")].append(_seconds(job))
    print(f"{'view':<10} {'s':>6} {'jobs':>5} {'job s':>6}")
    for view, seconds in sorted(timer.per_view().items(), key=lambda item: -item[1]):
        print(f"{view:<10} {seconds:6.2f} {len(jobs[view]):5} {sum(jobs[view]):6.2f}")
    rest = [seconds for group, durations in jobs.items() if group not in timer.per_view()
            for seconds in durations]  # ingestion's run in the streaming query's threads
    print(f"{'(rest)':<10} {'':6} {len(rest):5} {sum(rest):6.2f}")


def _seconds(job: dict[str, Any]) -> float:
    def moment(text: str) -> datetime:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%f%Z")
    return (moment(job.get("completionTime", job["submissionTime"]))
            - moment(job["submissionTime"])).total_seconds()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=["rf1", "rf2"])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--parts", type=int, default=1000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/tpch-bench"))
    parser.add_argument("--driver-memory", default="8g")
    args = parser.parse_args()
    from reconciler.engine.session import get_spark
    from reconciler.spec.project import SparkSettings

    args.work.mkdir(parents=True, exist_ok=True)
    data = generate(args.work, args.scale, args.parts)
    spark = get_spark(SparkSettings(conf={"spark.driver.memory": args.driver_memory,
                                          "spark.ui.enabled": "true"}))
    # The state records absolute paths: every run happens in `run`, restored from `base`.
    run = args.work / f"profile-sf{args.scale:g}-p{args.parts}"
    base = run.with_name(f"{run.name}.base")
    shutil.rmtree(run, ignore_errors=True)
    if (base / "saved.pickle").exists():
        shutil.copytree(base, run)
    else:
        prepare(spark, data, run, args.parts)
        shutil.rmtree(base, ignore_errors=True)
        shutil.copytree(run, base)
    profile(spark, data, run, args.kind, args.parts)


if __name__ == "__main__":
    main()
