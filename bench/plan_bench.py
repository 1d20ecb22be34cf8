"""Time `reconcile plan` as a whole process on a synthetic 1,000-view pipeline.

The pipeline is a layered DAG: 20 tables, then layers of views that join two
relations of the layer below and aggregate. The script deploys nothing on Spark. It
plans three times, each a new process, and prints the wall-clock and CPU seconds
(user + system: the machine may be shared) of each and their ratio to the 1-second
target of issue 33:

* a new pipeline: no state, every view analysed;
* one view modified, as a user's second plan: the manifest a first deployment commits
  (`operations.first_manifest`: the program and its analysis memo) kept where a
  deployment keeps state, outside the project (S3, or a folder outside the checkout),
  then one mid-layer view edited: only what changed is analysed (`desired/analysis/memo.py`);
* the same with the state in the project's own `.reconcile/state`, where a pull
  request could have committed the manifest: the memo is not trusted there
  (`plan.planner.trusted_memo`) and every view is analysed.

Then, in this process, the CPU seconds of building the programs and of the rest of
the plan for the modified case, and how many views the memo spared. `--profile FILE`
writes a cProfile of that in-process plan.

Usage: `python bench/plan_bench.py [--profile FILE]` (`make bench`).
"""

from __future__ import annotations

import argparse
import cProfile
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from unittest.mock import patch

from reconciler.desired.model.program import Program, build_program
from reconciler.desired.settings.project import settings_summary
from reconciler.desired.workspace import load_programs
from reconciler.operations.commit import first_manifest
from reconciler.plan import planner
from reconciler.state.reader import open_backend, pipeline_layout

TABLES = 20
VIEWS = 1000
LAYER = 50
TARGET_SECONDS = 1.0
EDIT = ("a.amount > 3 group by", "a.amount > 4 group by")  # v3, in the first layer


def synthetic_sql(views: int = VIEWS, seed: int = 7) -> str:
    rng = random.Random(seed)
    statements = [
        f"create table t{i} (id bigint not null, k int, amount decimal(12,2), "
        f"day date, label string, primary key (id)) with ('materialized' = 'true');"
        for i in range(TABLES)
    ]
    below = [f"t{i}" for i in range(TABLES)]
    current: list[str] = []
    for index in range(views):
        left, right = rng.sample(below, 2)
        name = f"v{index}"
        if index % 3 == 0:
            body = (f"select a.k, count(*) as n, sum(a.amount) as amount, max(b.day) as day, "
                    f"min(a.label) as label, min(a.id) as id from {left} a join {right} b "
                    f"on a.k = b.k where a.amount > {index % 17} group by a.k")
        elif index % 3 == 1:
            body = (f"with recent as (select * from {left} where day >= date '2025-01-01') "
                    f"select r.id, r.k, r.amount + coalesce(b.amount, 0) as amount, r.day, "
                    f"r.label from recent r left join {right} b on r.id = b.id")
        else:
            body = (f"select id, k, amount, day, upper(label) as label from {left} "
                    f"union all select id, k, amount, day, label from {right}")
        statements.append(f"create view {name} as {body};")
        current.append(name)
        if len(current) == LAYER:
            below, current = current, []
    return "\n".join(statements) + "\n"


def run_plan(project: Path, *options: str) -> tuple[float, float]:
    """Wall-clock and CPU seconds of one `reconcile plan` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "reconciler", "-C", str(project), "plan",
                             "--out", str(project / "plan.json"), *options],
                            capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"plan failed: {result.stderr.strip()}")
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def deploy(project: Path, state: str) -> None:
    """Commit, into the backend at `state`, the manifest a first deployment would."""
    loaded, [program] = load_programs(project)
    manifest = first_manifest(program, settings=settings_summary(loaded.settings))
    backend = open_backend(loaded, state)
    backend.write_manifest("bench", manifest.stored_document(pipeline_layout(loaded, "bench")),
                           None)


def in_process(project: Path, profile: Path | None) -> dict[str, Any]:
    """CPU seconds of the modified plan's parts in this process, and the memo's reuse."""
    built: list[Program] = []
    spent = {"build": 0.0}

    def build(*args: Any) -> Program:
        started = time.process_time()
        built.append(real_build(*args))
        spent["build"] += time.process_time() - started
        return built[-1]

    real_build = build_program
    profiler = cProfile.Profile() if profile else None
    started = time.process_time()
    if profiler:
        profiler.enable()
    with patch.object(planner, "build_program", build):  # where the planner calls it
        planner.compute_plan(project, None, None)
    if profiler:
        profiler.disable()
        profiler.dump_stats(profile)  # type: ignore[arg-type]  # a profiler is made only with a path
    total = time.process_time() - started
    analysis = built[0].analysis
    assert analysis is not None
    return {"build": spent["build"], "rest": total - spent["build"],
            "reused": analysis.reused, "analysed": analysis.analysed}


def line(what: str, wall: float, cpu: float, note: str = "") -> str:
    return (f"{what:<44} {wall:5.2f} s wall, {cpu:5.2f} s CPU "
            f"({wall / TARGET_SECONDS:.2f} x the {TARGET_SECONDS:.0f} s target{note})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", type=Path, help="cProfile of the in-process plan")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder) / "project"
        sql_path = project / "pipelines/bench/program.sql"
        sql_path.parent.mkdir(parents=True)
        (project / "pipelines/bench/pipeline.yaml").write_text("name: bench\n")
        (project / "reconcile.yaml").write_text("backend: ../state\n")  # outside the project
        sql = synthetic_sql()
        sql_path.write_text(sql)
        new_pipeline = run_plan(project)
        deploy(project, "../state")
        deploy(project, ".reconcile/state")
        sql_path.write_text(sql.replace(*EDIT, 1))  # the first of the ~20 views it matches
        modified = run_plan(project)
        in_checkout = run_plan(project, "--backend", ".reconcile/state")
        parts = in_process(project, args.profile)
    print(f"views: {VIEWS}, tables: {TABLES}")
    print(line("plan, new pipeline:", *new_pipeline))
    print(line("plan, one view modified:", *modified,
               f"; {parts['reused']} views from the memo, {parts['analysed']} analysed"))
    print(line("plan, one view modified, state in project:", *in_checkout,
               "; memo not trusted there"))
    print(f"in process, one view modified: programs built in {parts['build']:.2f} s CPU, "
          f"the rest of the plan {parts['rest']:.2f} s CPU")


if __name__ == "__main__":
    main()
