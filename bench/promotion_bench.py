"""Promotion at apply: adopting a pull-request environment's view, then catching it up, against
recomputing the view, as an apply does without an environment (issue 81).

The step bench's pipeline (`bench/step_bench.py`: a fact table of N events, default 4M, a
20-group aggregate `by_kind` and a view over it, a filter view, a join) is deployed; a pull
request modifies the maintained aggregate `by_kind` (one more column; `busy_kinds`, which
reads it, is recomputed with it). Its environment is built from production's state (the
same bootstrap `reconcile env create` runs, into the environment's own folder); production
then takes 10 steps of 1,000 new rows each. Then the apply's bootstrap runs both ways over
the same committed state, alternately, `--repeats` times each:

* recompute: the modified views computed from the 4M+ stored rows (an apply today);
* promote: the environment's views adopted and caught up over the 10 steps' changes
  (`engine.promotion`).

Printed: the median time of each (the apply's bootstrap on a warm session: the command's
JVM start and manifest commit are the same either way and not in these figures), their
ratio (goal: promotion at most 0.3x the recompute), and whether the two results hold the
same rows (a Spark job comparing them; nothing is collected).

Usage: `python bench/promotion_bench.py [--rows 4000000] [--steps 10] [--repeats 2]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.step_bench import SQL, STEP_ROWS, step_events  # noqa: E402 (after the path is set up)

CHANGED = SQL.replace("avg(amount) as average", "avg(amount) as average, max(amount) as biggest")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    from reconciler.desired.settings.project import SparkSettings
    from reconciler.engine.bootstrap.recompute import bootstrap
    from reconciler.engine.delta.storage import DeltaStorage
    from reconciler.engine.promotion import Promotion
    from reconciler.engine.runtime import PipelineRuntime
    from reconciler.engine.spark.session import get_spark
    from reconciler.engine.step import run_step
    from reconciler.plan.diff import diff_programs
    from reconciler.state.layout import Layout
    from reconciler.state.program import CommittedProgram
    from tests.projects import program_of, write_files

    spark = get_spark(SparkSettings())
    root = Path(tempfile.mkdtemp(prefix="promotion-bench-"))
    documents = {}
    for name, sql in (("old", SQL), ("new", CHANGED)):
        write_files(root / name, {"pipelines/bench/pipeline.yaml":
                                  "name: bench\nsql: [program.sql]\nrefresh: incremental\n",
                                  "pipelines/bench/program.sql": sql})
        documents[name] = program_of(root / name).document()
    old, new = documents["old"], documents["new"]
    storage = DeltaStorage(spark)
    production = Layout(str(root / "state"), "bench")

    def runtime(program: dict, relations: dict, layout: Layout = production) -> PipelineRuntime:
        return PipelineRuntime(spark, storage, layout, CommittedProgram.of(program),
                               dict(relations), project_dir=root)

    deployed = runtime(old, {})
    tables_only = {**old, "views": {}, "order": [n for n in old["order"] if n in old["tables"]]}
    bootstrap(deployed, diff_programs(None, tables_only), {}, serial=1, silent=True)
    storage.append(deployed.relations["events"].path, step_events(spark, 0, args.rows))
    storage.append(deployed.relations["users"].path, spark.range(1000).selectExpr(
        "cast(id as int) as id", "concat('c', cast(id % 30 as string)) as country"))
    for table in ("events", "users"):
        deployed.pin(table, deployed.relation(table).latest())
    bootstrap(deployed, diff_programs(tables_only, old), {}, serial=1, silent=True)
    base = dict(deployed.relations)

    change = diff_programs(old, new)
    environment = runtime(new, base, Layout(str(root / "environments" / "pr_1"), "bench"))
    started = time.perf_counter()
    bootstrap(environment, change, {}, serial=2, silent=True)
    built = time.perf_counter() - started
    promoted = {name: record for name, record in environment.relations.items()
                if record.path.startswith(str(root / "environments"))}
    print(f"{args.rows:,} rows: environment built in {built:.2f} s, holding "
          f"{', '.join(sorted(promoted))}", flush=True)

    for step in range(args.steps):
        storage.append(deployed.relations["events"].path,
                       step_events(spark, args.rows + step * STEP_ROWS, STEP_ROWS))
        run_step(deployed, {}, serial=step + 2, ingest_inputs=False)
    current = dict(deployed.relations)

    times: dict[str, list[float]] = {"recompute": [], "promote": []}
    results = {}
    for _ in range(args.repeats):
        for way in ("recompute", "promote"):
            applying = runtime(new, current)
            promotion = Promotion(promoted, base, "pr_1") if way == "promote" else None
            started = time.perf_counter()
            bootstrap(applying, change, {}, serial=args.steps + 2, silent=True,
                      elsewhere=promotion)
            times[way].append(time.perf_counter() - started)
            if promotion is not None:
                promotion.close()
            results[way] = dict(applying.relations)
    recompute, promote = (statistics.median(times[way]) for way in ("recompute", "promote"))
    same = all(
        deployed.frame_of(results["recompute"][view]).exceptAll(
            deployed.frame_of(results["promote"][view])).isEmpty()
        and deployed.frame_of(results["promote"][view]).exceptAll(
            deployed.frame_of(results["recompute"][view])).isEmpty()
        for view in promoted)
    print(f"after {args.steps} steps of {STEP_ROWS:,} rows: apply's bootstrap recomputing "
          f"{recompute:.2f} s, promoting {promote:.2f} s: {promote / recompute:.3f}x "
          f"(goal <= 0.3); same rows: {same}")


if __name__ == "__main__":
    main()
