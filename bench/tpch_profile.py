"""Where one TPC-H refresh step's time goes, per view: wall time and Spark jobs.

`bench/tpch_bench.py` answers "how long"; this answers "on what". It loads the
TPC-H tables (all slices but the first and last) and computes the 22 views once
(the data from `tpch_bench.generate`, the state kept under `--work`), then each run
restores that state and runs one step through the real engine: `rf1` adds the last
slice of orders and lineitems, `rf2` deletes the first through the `changes: true`
connectors. It prints each refreshed view's time, the number and summed duration
of the Spark jobs it ran, their tasks' run time and the rows they read (each view's
jobs carry its name as their job group; the figures come from the Spark UI's REST
API), slowest first; and where the machine's CPU went: the JVM's per kind of thread
(tasks, JIT compilers, the py4j threads that plan queries, GC) and the Python
driver's. `--warm-steps N` runs N steps first in the same JVM (RF1 of slice 1, then
RF2s of the last loaded slices), as a running pipeline's JVM has: the JIT's share
falls step by step.

Usage: `python bench/tpch_profile.py rf1 [--scale 1] [--parts 1000] [--jobs q1 q3]`
(`--jobs`: each job of those views, with the line that started it). Wrap it in
`py-spy record --idle` for the driver's Python side; for the JVM's, `jcmd <pid>
JFR.start` / `JFR.dump` (Java Flight Recorder) around the step.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import pickle
import re
import shutil
import sys
import threading
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


def prepare(spark: Any, data: Path, root: Path, parts: int, refresh: str) -> None:
    """The pipeline's state with every table loaded and every view computed, once."""
    runtime, connectors = load(spark, data, root, refresh, range(2, parts), Timer())
    (root / "saved.pickle").write_bytes(pickle.dumps((runtime.program, runtime.relations,
                                                      connectors)))


def profile(spark: Any, data: Path, root: Path, kind: str, parts: int,
            detail: list[str], workers: int | None, warm_steps: int) -> None:
    """One step on a copy of the prepared state, each view's jobs in its own job group."""
    import reconciler.engine.refresh as refresh
    import reconciler.engine.step as step
    from reconciler.engine.delta.storage import DeltaStorage
    from reconciler.engine.runtime import PipelineRuntime
    from reconciler.engine.step import run_step
    from reconciler.state.layout import Layout

    program, relations, connectors = pickle.loads((root / "saved.pickle").read_bytes())
    timer = Timer()
    runtime = PipelineRuntime(spark, DeltaStorage(spark), Layout(str(root / "state"), "tpch"),
                              program, relations, report=timer,
                              project_dir=root)
    refresh_update = refresh.refresh_update  # type: ignore[attr-defined]  # patched where it is used

    def grouped(runtime: PipelineRuntime, frames: Any, view: str, shape: Any) -> Any:
        # per thread (the refresh's worker, which then writes the update); no description,
        # so a query shows its call site
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", view)
        return refresh_update(runtime, frames, view, shape)

    refresh.refresh_update = grouped  # type: ignore[attr-defined]  # patched where it is used
    step.refresh_views = functools.partial(refresh.refresh_views,  # type: ignore[attr-defined]  # patched where it is used
                                           workers=workers or refresh.REFRESH_WORKERS)
    serial = 4
    for warm in range(warm_steps):  # steps before, as a running pipeline has had
        started, cpu = time.perf_counter(), JvmCpu(spark)
        for table in SLICED:  # slice 1 (never loaded) arrives, then loaded slices leave
            if warm == 0:
                source = slice_file(data, table, 1)
                os.link(source, root / "input" / table / source.name)
            else:
                deletion_file(slice_file(data, table, parts - warm),
                              root / "input" / f"{table}_rf2" / f"warm.{warm}.parquet")
        connectors = run_step(runtime, connectors, serial=serial).connectors
        serial += 1
        print(f"warm step {warm + 1}: {time.perf_counter() - started:.1f} s, views refreshed "
              f"in {timer.phase():.1f} s, the JIT's CPU {cpu.used().get(JIT, 0.0):.1f} s",
              flush=True)
        timer.marks.clear()
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
    started, cpu, python = time.perf_counter(), JvmCpu(spark), time.process_time()
    run_step(runtime, connectors, serial=serial)
    print(f"{kind}: step {time.perf_counter() - started:.1f} s, views refreshed in "
          f"{timer.phase():.1f} s; the driver's Python process used "
          f"{time.process_time() - python:.1f} s of CPU")
    used = cpu.used()
    print(f"the JVM's CPU in the step: {sum(used.values()):.1f} s;", ", ".join(
        f"{name} {seconds:.1f}" for name, seconds in sorted(used.items(), key=lambda x: -x[1])
        if seconds >= 0.5))
    jobs: dict[str, list[float]] = defaultdict(list)
    sites: dict[str, list[int]] = defaultdict(list)
    stages: dict[str, set[int]] = defaultdict(set)
    for job in sorted(json.load(urllib.request.urlopen(url)), key=lambda job: job["jobId"]):
        if job["jobId"] not in earlier:  # the step's only: not the load's, not the warm-up's
            jobs[job.get("jobGroup", "")].append(_seconds(job))
            sites[job.get("jobGroup", "")].append(job["jobId"])
            stages[job.get("jobGroup", "")].update(job["stageIds"])
    work = _stage_work(url.replace("/jobs", "/stages"))
    print(f"{'view':<10} {'s':>6} {'jobs':>5} {'job s':>6} {'task s':>6} {'rows read':>10}")
    for view, seconds in sorted(timer.per_view().items(), key=lambda item: -item[1]):
        mine = [work[stage] for stage in stages[view] if stage in work]
        print(f"{view:<10} {seconds:6.2f} {len(jobs[view]):5} {sum(jobs[view]):6.2f} "
              f"{sum(task for task, _ in mine):6.2f} {sum(rows for _, rows in mine):10,}")
    rest = [seconds for group, durations in jobs.items() if group not in timer.per_view()
            for seconds in durations]  # ingestion's run in the streaming query's threads
    print(f"{'(rest)':<10} {'':6} {len(rest):5} {sum(rest):6.2f}")
    if detail:
        _queries(url.replace("/jobs", "/sql"), {view: sites[view] for view in detail})


def _queries(url: str, jobs: dict[str, list[int]]) -> None:
    """Each SQL query a view's jobs ran for: its duration, jobs and the driver's call site."""
    executions = json.load(urllib.request.urlopen(f"{url}?details=false&length=100000"))
    for view, ids in jobs.items():
        print(f"\n{view}: {'s':>6} jobs")
        for execution in executions:
            mine = [job for key in ("successJobIds", "failedJobIds", "runningJobIds")
                    for job in execution.get(key, []) if job in ids]
            if mine:
                print(f"  {execution['duration'] / 1000:6.2f} {len(mine):4}  "
                      f"{execution['description'][:100]}")


JIT = "C# CompilerThre"
"""The JIT compiler threads' kind (C1 and C2 alike: a thread's name is cut to 15 bytes)."""


class JvmCpu:
    """CPU seconds (user and system) the driver's JVM uses over a span, per kind of thread
    (its name without digits: Spark's task threads, the JIT's compilers, the garbage
    collector, `Thread-#`: the py4j threads that plan each Python thread's queries).

    Sampled every quarter second, so that a thread ending within the span (the py4j
    thread of a refresh worker ends with it) still counts, short of its last sample."""

    def __init__(self, spark: Any) -> None:
        self.pid = spark.sparkContext._gateway.proc.pid  # spark-submit execs the JVM in place
        self.first = self.last = self._threads()
        self.stop = threading.Event()
        self.sampler = threading.Thread(target=self._sample, daemon=True)
        self.sampler.start()

    def _sample(self) -> None:
        while not self.stop.wait(0.25):
            self.last = {**self.last, **self._threads()}

    def used(self) -> dict[str, float]:
        """Per kind of thread, its CPU since the span began (ends the span)."""
        self.stop.set()
        self.sampler.join()
        self.last = {**self.last, **self._threads()}
        used: dict[str, float] = defaultdict(float)
        for thread, (name, seconds) in self.last.items():
            used[name] += seconds - self.first.get(thread, (name, 0.0))[1]
        return used

    def _threads(self) -> dict[tuple[int, int], tuple[str, float]]:
        threads = {}
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            try:
                stat = (task / "stat").read_text()
            except FileNotFoundError:  # the thread ended meanwhile
                continue
            name = re.sub(r"[0-9]+", "#", stat[stat.index("(") + 1:stat.rindex(")")])
            fields = stat.rsplit(")", 1)[1].split()
            threads[int(task.name), int(fields[19])] = (  # a thread id, reused, starts anew
                name, (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
        return threads


def _stage_work(url: str) -> dict[int, tuple[float, int]]:
    """Per stage that ran: its tasks' summed run time (seconds) and the input rows they
    read (a skipped stage, whose shuffle output was reused, has none)."""
    return {stage["stageId"]: (stage["executorRunTime"] / 1000, stage["inputRecords"])
            for stage in json.load(urllib.request.urlopen(url))
            if stage["status"] == "COMPLETE"}


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
    parser.add_argument("--java-options", default="",
                        help="extra flags for the JVM (spark.driver.extraJavaOptions)")
    parser.add_argument("--conf", nargs="*", default=[], metavar="KEY=VALUE",
                        help="Spark settings (e.g. spark.sql.adaptive.enabled=false)")
    parser.add_argument("--workers", type=int,
                        help="views refreshed at once (REFRESH_WORKERS)")
    parser.add_argument("--refresh", choices=["incremental", "full"], default="incremental",
                        help="the pipeline's refresh mode (each has its own prepared state)")
    parser.add_argument("--warm-steps", type=int, default=0, metavar="N",
                        help="steps before the measured one, in one JVM: RF1 of slice 1, "
                        "then RF2s of the last loaded slices")
    parser.add_argument("--jobs", nargs="*", default=[], metavar="VIEW",
                        help="list each job of these views (seconds, call site)")
    args = parser.parse_args()
    from reconciler.desired.settings.project import SparkSettings
    from reconciler.engine.spark.session import get_spark

    args.work.mkdir(parents=True, exist_ok=True)
    data = generate(args.work, args.scale, args.parts)
    conf = {"spark.driver.memory": args.driver_memory, "spark.ui.enabled": "true"}
    conf |= dict(setting.split("=", 1) for setting in args.conf)
    if args.java_options:
        conf["spark.driver.extraJavaOptions"] = args.java_options
    spark = get_spark(SparkSettings(conf=conf))
    # The state records absolute paths: every run happens in `run`, restored from `base`.
    suffix = "" if args.refresh == "incremental" else f"-{args.refresh}"
    run = args.work / f"profile-sf{args.scale:g}-p{args.parts}{suffix}"
    base = run.with_name(f"{run.name}.base")
    shutil.rmtree(run, ignore_errors=True)
    if (base / "saved.pickle").exists():
        shutil.copytree(base, run)
    else:
        prepare(spark, data, run, args.parts, args.refresh)
        shutil.rmtree(base, ignore_errors=True)
        shutil.copytree(run, base)
    profile(spark, data, run, args.kind, args.parts, args.jobs, args.workers, args.warm_steps)


if __name__ == "__main__":
    main()
