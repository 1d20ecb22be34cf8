"""TPC-H through the reconciler: which of the 22 queries are maintained, and what a refresh costs.

The eight TPC-H tables come from `tpchgen-cli` (PyPI) at the scale factor given,
as Parquet; `orders` and `lineitem` are generated in `--parts` slices of
consecutive order keys (1,000 parts: 0.1% each). The pipeline
(`bench/tpch/tables.sql`, `bench/tpch/views.sql`: the 22 queries with their
validation parameters, ORDER BY/LIMIT dropped) reads every table through a
`files` connector. The initial load ingests everything but the last `--steps`
slices of orders and lineitem, then the views are computed (a bootstrap that
adds them). Then, through the real engine (`run_step`: ingestion, maintenance,
Delta commits), alternating:

* RF1: one held-back slice of new orders and their lineitems lands in the input
  folders;
* RF2: the orders of one old slice and their lineitems are deleted, as
  `_op = 'delete'` rows through `changes: true` connectors.

After every step each view is compared with its query from scratch (the step
fails if one differs). Printed per query: how the plan refreshes it, and per
step kind its time and the bytes it wrote (the view's folder and its state), next
to the same pipeline with `refresh: full`; then the issue's goals: per maintained
view at most 20x the step's input bytes + 200 kB, and the time to refresh the
views at most 0.2x the time to recompute them. Views are refreshed side by side
(`engine/refresh.py`), so that time is the step's refresh phase (first view
started to last view done; it includes Q11 and Q16, recomputed in both modes),
and a view's own time overlaps others'.

By default (`--refresh incremental full auto`) the same steps also run a third time under
`refresh: auto`, the default mode (`engine/maintenance/refresh_choice.py`), and each auto
step's time
is set against the faster of the other two's same step (the goal: never more than 10%
slower).

Usage: `python bench/tpch_bench.py [--scale 1] [--parts 1000] [--steps 2]
[--refresh incremental full auto]` (`make bench-tpch`). The data is generated once per
scale and parts under `--work` (default `/tmp/tpch-bench`).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pyspark is imported once the path is set up
    from pyspark.sql import SparkSession

    from reconciler.state.connectors import ConnectorState

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from bench.step_bench import file_sizes  # noqa: E402 (after the path is set up)
from reconciler.support.errors import ObjectFailed  # noqa: E402

TABLES = ("region", "nation", "part", "supplier", "partsupp", "customer", "orders", "lineitem")
SLICED = ("orders", "lineitem")


@dataclass(frozen=True)
class Workload:
    """What the steps below run: a pipeline `name` of `tables` (each `<table>.parquet`
    under the data folder, or `slice_file` slices for the `sliced` ones, which the refresh
    steps add to and delete from) and the SQL files in `sql` (`tables.sql`, `views.sql`);
    `goal` is the refresh phase's ratio to recomputing that the report checks."""

    name: str
    tables: tuple[str, ...]
    sliced: tuple[str, ...]
    sql: Path
    goal: float


TPCH = Workload("tpch", TABLES, SLICED, ROOT / "bench" / "tpch", goal=0.2)


def generate(work: Path, scale: float, parts: int) -> Path:
    """The generated Parquet files (once per scale and parts): `<table>.parquet`, and
    `<table>/<table>.<i>.parquet` for the sliced tables."""
    data = work / f"sf{scale:g}-p{parts}"
    if (data / "done").exists():
        return data
    generator = shutil.which("tpchgen-cli") or str(Path(sys.executable).parent / "tpchgen-cli")
    others = ",".join(table for table in TABLES if table not in SLICED)
    subprocess.run([generator, "parquet", "-s", f"{scale:g}", "-o", str(data), "-T", others,
                    "--overwrite"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run([generator, "parquet", "-s", f"{scale:g}", "-o", str(data), "-T",
                    ",".join(SLICED), "--parts", str(parts), "--overwrite"], check=True,
                   stdout=subprocess.DEVNULL)
    (data / "done").touch()
    return data


def slice_file(data: Path, table: str, part: int) -> Path:
    return data / table / f"{table}.{part}.parquet"


def deletion_file(source: Path, target: Path) -> int:
    """`source`'s rows with `_op = 'delete'` (an RF2 batch), written to `target`; its bytes.
    Bench data preparation, a file of one slice at a time (pyarrow, no Spark)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = pq.read_table(source)
    rows = rows.append_column("_op", pa.array(["delete"] * rows.num_rows, pa.string()))
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(rows, target)
    return target.stat().st_size


def project(root: Path, refresh: str, workload: Workload = TPCH) -> None:
    connectors = "".join(
        f"  - {{name: {table}_in, table: {table}, type: files, format: parquet, "
        f"path: input/{table}}}\n" for table in workload.tables) + "".join(
        f"  - {{name: {table}_rf2, table: {table}, type: files, format: parquet, "
        f"path: input/{table}_rf2, changes: true}}\n" for table in workload.sliced)
    pipeline = root / "pipelines" / workload.name
    pipeline.mkdir(parents=True)
    (pipeline / "pipeline.yaml").write_text(
        f"name: {workload.name}\nrefresh: {refresh}\nsql: [tables.sql, views.sql]\n"
        f"connectors:\n{connectors}")
    for name in ("tables.sql", "views.sql"):
        shutil.copy(workload.sql / name, pipeline / name)
    for table in (*workload.tables, *(f"{table}_rf2" for table in workload.sliced)):
        (root / "input" / table).mkdir(parents=True)


class Timer:
    """A progress reporter that times each view of a step, from its `refresh` report to
    its `refreshed` one (views run side by side, so these overlap), and the refresh
    phase: from the first view's start to the last one's end."""

    def __init__(self) -> None:
        self.marks: dict[tuple[str, str], float] = {}

    def __call__(self, stage: str, item: str) -> None:
        self.marks[stage, item] = time.perf_counter()

    def per_view(self) -> dict[str, float]:
        return {item: self.marks["refreshed", item] - start
                for (stage, item), start in self.marks.items() if stage == "refresh"}

    def phase(self) -> float:
        starts = [mark for (stage, _), mark in self.marks.items() if stage == "refresh"]
        ends = [mark for (stage, _), mark in self.marks.items() if stage == "refreshed"]
        return max(ends) - min(starts) if starts else 0.0


def load(spark: SparkSession, data: Path, root: Path, refresh: str, slices: range,
         report: Timer, workload: Workload = TPCH) -> tuple[Any, dict[str, ConnectorState]]:
    """The pipeline in `root` with the unsliced tables and `slices` of the sliced ones
    ingested (a step), then its views computed (a bootstrap that adds them); returns its
    runtime (whose reports go to `report`) and its connectors' state."""
    from reconciler.engine.bootstrap.recompute import bootstrap
    from reconciler.engine.delta.storage import DeltaStorage
    from reconciler.engine.runtime import PipelineRuntime
    from reconciler.engine.step import run_step
    from reconciler.plan.diff import diff_programs
    from reconciler.state.layout import Layout
    from reconciler.state.program import CommittedProgram
    from tests.projects import program_of

    project(root, refresh, workload)
    document = program_of(root).document()
    for table in workload.tables:
        sources = ([slice_file(data, table, part) for part in slices]
                   if table in workload.sliced else [data / f"{table}.parquet"])
        for source in sources:
            os.link(source, root / "input" / table / source.name)
    tables_only = {**document, "views": {}, "order": [
        name for name in document["order"] if name in document["tables"]]}
    runtime = PipelineRuntime(spark, DeltaStorage(spark),
                              Layout(str(root / "state"), workload.name),
                              CommittedProgram.of(tables_only), {}, report=report,
                              project_dir=root)
    started = time.perf_counter()
    connectors = bootstrap(runtime, diff_programs(None, tables_only), {}, serial=1,
                           silent=True).connectors
    connectors = run_step(runtime, connectors, serial=2).connectors
    load_time = time.perf_counter() - started
    started = time.perf_counter()
    runtime.program = CommittedProgram.of(document)
    bootstrap(runtime, diff_programs(tables_only, document), connectors, serial=3,
              silent=True)
    largest = workload.sliced[-1]
    print(f"[{refresh}] loaded {runtime.relations[largest].rows:,} rows of {largest} in "
          f"{load_time:.0f} s, views computed in {time.perf_counter() - started:.0f} s",
          flush=True)
    return runtime, connectors


def run(spark: SparkSession, data: Path, work: Path, refresh: str, parts: int, steps: int,
        check: bool, show_choices: bool, workload: Workload = TPCH, warmup: int = 0
        ) -> dict[str, Any]:
    """The load, then `warmup` RF1 and RF2 steps that are not timed (the JVM's JIT warms up
    on this mode's own code, and `refresh: auto` times each view once either way, as a
    runner has after its first steps), then `steps` timed ones."""
    from reconciler.engine.step import run_step
    from tests.comparison import differing
    from tests.projects import program_of

    timer = Timer()
    held_back = steps + warmup
    while True:
        root = Path(tempfile.mkdtemp(prefix=f"{workload.name}-{refresh}-", dir=work))
        try:
            runtime, connectors = load(spark, data, root, refresh,
                                       range(1, parts - held_back + 1), timer, workload)
            break
        except ObjectFailed as failed:  # the query's own error on this data: set aside
            if failed.what != "view":
                raise
            print(f"set aside: {failed.name}: {failed}", flush=True)
            set_aside(workload.sql / "views.sql", failed.name)
            shutil.rmtree(root)
    modes = {name: view.refresh.describe() for name, view in program_of(root).views.items()}
    views = list(runtime.program.views)
    folders = {view: [runtime.relations[view].path,
                      *([state.path] if (state := runtime.relations[view].state) else [])]
               for view in views}
    figures: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    inputs: dict[str, list[int]] = defaultdict(list)
    maintained: dict[str, list[set[str]]] = defaultdict(list)  # by refresh: auto, per step
    serial = 4
    for step in range(held_back):
        timed = step >= warmup
        for kind in ("RF1", "RF2"):
            before = file_sizes(root / "state")
            if kind == "RF1":
                added = 0
                for table in workload.sliced:
                    source = slice_file(data, table, parts - held_back + 1 + step)
                    os.link(source, root / "input" / table / source.name)
                    added += source.stat().st_size
            else:
                added = sum(deletion_file(slice_file(data, table, 1 + step),
                                          root / "input" / f"{table}_rf2" /
                                          f"delete.{step}.parquet")
                            for table in workload.sliced)
            timer.marks.clear()
            runtime.refresh_choices.clear()
            started = time.perf_counter()
            result = run_step(runtime, connectors, serial=serial)
            ended = time.perf_counter()
            connectors, serial = result.connectors, serial + 1
            assert sorted(result.changed_tables) == sorted(workload.sliced), \
                result.changed_tables
            if timed:
                after = file_sizes(root / "state")
                new_files = {path: size for path, size in after.items() if path not in before}
                inputs[kind].append(added)
                figures["step"][kind].append(ended - started)
                figures["phase"][kind].append(timer.phase())
                for view, seconds in timer.per_view().items():
                    figures[view][f"{kind} time"].append(seconds)
                for view in views:
                    figures[view][f"{kind} bytes"].append(sum(
                        size for path, size in new_files.items()
                        if any(path.startswith(folder.rstrip("/") + "/")
                               for folder in folders[view])))
                maintained[kind].append({view for view, choice in
                                         runtime.refresh_choices.items()
                                         if choice.startswith("maintained")})
            if check:
                wrong = differing({view: (runtime.frame(view), runtime.evaluate(view))
                                   for view in views})
                for view in wrong:  # a few rows each way, to see what went wrong
                    stored, scratch = runtime.frame(view), runtime.evaluate(view)
                    print(f"{view}: stored, not from scratch:")
                    stored.exceptAll(scratch).show(5, truncate=False)
                    print(f"{view}: from scratch, not stored:")
                    scratch.exceptAll(stored).show(5, truncate=False)
                assert not wrong, f"[{refresh}] {kind} step {step + 1}: differ: {wrong}"
            chosen = Counter(choice.split(" ", 1)[0]
                             for choice in runtime.refresh_choices.values())
            print(f"[{refresh}] {kind} step {step + 1}{'' if timed else ' (warm-up)'}: "
                  f"{ended - started:.1f} s, input "
                  f"{added / 1e3:.0f} kB{', every view equals its query' if check else ''}"
                  + (f"; auto chose: {dict(chosen)}" if chosen else ""), flush=True)
            if show_choices:
                for view, choice in sorted(runtime.refresh_choices.items()):
                    print(f"    {view}: {choice}", flush=True)
    return {"modes": modes, "figures": figures, "inputs": inputs, "maintained": maintained}


def set_aside(views: Path, name: str) -> None:
    """Drop view `name`'s statement from `views` (one `CREATE MATERIALIZED VIEW` each): a
    query that fails on the data loaded (a division by a count that is 0 there, under
    ANSI SQL) cannot be refreshed either way."""
    statements = re.split(r"(?=^CREATE MATERIALIZED VIEW )", views.read_text(), flags=re.M)
    kept = [text for text in statements
            if not re.match(rf"CREATE MATERIALIZED VIEW {re.escape(name)}\b", text)]
    assert len(kept) == len(statements) - 1, f"{views}: no view {name}"
    views.write_text("".join(kept))


def median(values: list[float]) -> float:
    return statistics.median(values) if values else 0.0


def natural(name: str) -> tuple[Any, ...]:
    """`name`'s sort key with its numbers as numbers (q2 before q10)."""
    return tuple(int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name))


def report(results: dict[str, dict[str, Any]], workload: Workload = TPCH) -> None:
    if "auto" in results:
        auto_report(results, workload.goal)
    if "incremental" not in results:
        return
    incremental, full = results["incremental"], results.get("full")
    modes = incremental["modes"]
    queries = sorted(modes, key=natural)
    width = max(9, *(len(name) for name in queries))
    header = (f"{'view':<{width}} {'refresh':<60} {'RF1 s':>7} {'RF1 kB':>8} {'RF2 s':>7} "
              f"{'RF2 kB':>8}" + (f" | {'full RF1 s':>10} {'RF2 s':>7} {'RF1 kB':>8}"
                                  if full else ""))
    print(header)
    print("-" * len(header))
    maintained = [name for name in queries if modes[name].startswith("maintained")]
    for name in queries:
        mine = incremental["figures"][name]
        line = (f"{name:<{width}} {modes[name][:60]:<60} {median(mine['RF1 time']):7.2f} "
                f"{median(mine['RF1 bytes']) / 1e3:8.1f} {median(mine['RF2 time']):7.2f} "
                f"{median(mine['RF2 bytes']) / 1e3:8.1f}")
        if full:
            theirs = full["figures"][name]
            line += (f" | {median(theirs['RF1 time']):10.2f} {median(theirs['RF2 time']):7.2f} "
                     f"{median(theirs['RF1 bytes']) / 1e3:8.1f}")
        print(line)
    whole = [name for name in maintained if modes[name] != "maintained incrementally"]
    print(f"\nmaintained: {len(maintained)} of {len(queries)} views; of those, "
          f"{', '.join(whole) or 'none'} read some relations whole and compare in full when "
          "one of them changes")
    for kind in ("RF1", "RF2"):
        budget = 20 * median(incremental["inputs"][kind]) + 200_000
        over = [name for name in maintained
                if median(incremental["figures"][name][f"{kind} bytes"]) > budget]
        mine = median(incremental["figures"]["phase"][kind])
        line = (f"{kind}: input {median(incremental['inputs'][kind]) / 1e3:.0f} kB; budget per "
                f"maintained view {budget / 1e3:.0f} kB: {over or 'all within'}; "
                f"step {median(incremental['figures']['step'][kind]):.1f} s")
        if full:
            theirs = median(full["figures"]["phase"][kind])
            line += (f"; views refreshed in {mine:.1f} s vs recomputed in {theirs:.1f} s = "
                     f"{mine / theirs if theirs else float('nan'):.2f}x "
                     f"(goal <= {workload.goal:g}x); "
                     f"whole step {median(full['figures']['step'][kind]):.1f} s with refresh: full")
            slower = [name for name in maintained
                      if median(incremental["figures"][name][f"{kind} time"])
                      > median(full["figures"][name][f"{kind} time"])]
            line += f"; maintained views slower than their recompute: {slower or 'none'}"
        print(line)


def auto_report(results: dict[str, dict[str, Any]], goal: float) -> None:
    """`refresh: auto` against the faster of all-maintained and all-recomputed, step by step
    (the goal: never more than 10% slower); against `refresh: full`, its refresh phase (the
    goal: at most `goal` times the recompute's) and the views it maintained whose refresh
    took longer than their recompute there."""
    others = [mode for mode in ("incremental", "full") if mode in results]
    auto = results["auto"]
    for kind in ("RF1", "RF2"):
        steps = auto["figures"]["step"][kind]
        line = f"auto {kind}: steps {', '.join(f'{s:.1f}' for s in steps)} s"
        if others:
            best = [min(results[mode]["figures"]["step"][kind][i] for mode in others)
                    for i in range(len(steps))]
            ratios = [mine / theirs for mine, theirs in zip(steps, best, strict=True)]
            line += (f"; the faster of {' and '.join(others)}: "
                     f"{', '.join(f'{s:.1f}' for s in best)} s; worst ratio "
                     f"{max(ratios):.2f}x (goal <= 1.10x)")
        print(line)
        if "full" not in results:
            continue
        full = results["full"]["figures"]
        mine, theirs = median(auto["figures"]["phase"][kind]), median(full["phase"][kind])
        chosen = set.intersection(*auto["maintained"][kind]) if auto["maintained"][kind] \
            else set()
        slower = sorted((name for name in chosen
                         if median(auto["figures"][name][f"{kind} time"])
                         > median(full[name][f"{kind} time"])), key=natural)
        print(f"auto {kind}: views refreshed in {mine:.1f} s vs recomputed in {theirs:.1f} s "
              f"= {mine / theirs if theirs else float('nan'):.2f}x (goal <= {goal:g}x); "
              f"maintained {len(chosen)} of {len(auto['modes'])} views, slower than their "
              f"recompute: {slower or 'none'}")


def step_arguments(parser: argparse.ArgumentParser, steps: int, work: str) -> None:
    """The options of the steps themselves, shared with `bench/tpcds_bench.py`."""
    parser.add_argument("--steps", type=int, default=steps, help="RF1 and RF2 steps of each")
    parser.add_argument("--warmup", type=int, default=0,
                        help="RF1 and RF2 steps run first and not timed (the JIT's warm-up, "
                        "and refresh: auto's first timing of each view)")
    parser.add_argument("--refresh", nargs="+", default=["incremental", "full", "auto"],
                        choices=["incremental", "full", "auto"])
    parser.add_argument("--work", type=Path, default=Path(work))
    parser.add_argument("--driver-memory", default="8g",
                        help="heap of embedded Spark's one JVM, the whole cluster here (the "
                        "default 1g runs out computing TPC-H's Q21 at scale 1)")
    parser.add_argument("--no-check", action="store_true",
                        help="skip comparing every view with its query after each step")
    parser.add_argument("--choices", action="store_true",
                        help="print what refresh: auto chose for each view, and why")


def run_modes(args: argparse.Namespace, data: Path, workload: Workload = TPCH) -> None:
    """Every `--refresh` mode's steps in one embedded Spark, then the report."""
    from reconciler.desired.settings.project import SparkSettings
    from reconciler.engine.spark.session import get_spark

    spark = get_spark(SparkSettings(conf={"spark.driver.memory": args.driver_memory}))
    results = {refresh: run(spark, data, args.work, refresh, args.parts, args.steps,
                            not args.no_check, args.choices, workload, args.warmup)
               for refresh in args.refresh}
    report(results, workload)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--parts", type=int, default=1000)
    step_arguments(parser, steps=2, work="/tmp/tpch-bench")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    run_modes(args, generate(args.work, args.scale, args.parts))


if __name__ == "__main__":
    main()
