"""What a data preview costs next to the bootstrap it previews, on the seed story at scale.

The grades example with `--rows` grades (default 2,000,000, over 100,000 students and
7 classes) inserted through `reconcile execute`; then the seed story's change (the end
date moved, a new view). In one process, so the JVM is warm for both:

1. `reconcile plan --preview --json`: counts for `avg_grade` (modified, keyed),
   `avg_grade_enriched` (downstream) and `avg_grade_all_courses` (new);
2. `reconcile apply --auto-approve`: the bootstrap of the same three views.

Printed: both times and their ratio (the issue's goal: at most 1.2x), and the preview's
counts. The preview runs with Spark's default settings; nothing is collected but counts.

With `--tpch SCALE`, the same on TPC-H views instead: the eight tables (`tpchgen-cli`,
as `bench/tpch_bench.py` makes them, under `--work`) are applied and ingested by
`reconcile run`; then five of the 22 queries are added (new views: Q1, Q3, Q5, Q10,
Q12), previewed and applied; then two of them are modified (Q1's ship date, Q3's market
segment), previewed and applied again. Each preview is timed against its apply.

Usage: `python bench/preview_bench.py [--rows 2000000] [--tpch 1]` (`make bench-preview`).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from click.testing import CliRunner

from reconciler.cli.main import cli

ROOT = Path(__file__).resolve().parent.parent
GOAL = 1.2


def reconcile(project: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["-C", str(project), *args], catch_exceptions=False)
    if result.exit_code != 0:
        raise SystemExit(f"reconcile {' '.join(args)} failed: {result.output}")
    return result.output


def timed(project: Path, *args: str) -> tuple[float, str]:
    started = time.perf_counter()
    output = reconcile(project, *args)
    return time.perf_counter() - started, output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--tpch", type=float, help="TPC-H views at this scale factor")
    parser.add_argument("--work", type=Path, default=Path("/tmp/tpch-bench"))
    args = parser.parse_args()
    ratios = tpch(args.tpch, args.work) if args.tpch else grades(args.rows)
    sys.exit(0 if max(ratios) <= GOAL else 1)


TPCH_VIEWS = ("q1", "q3", "q5", "q10", "q12")
TPCH_EDITS = {"q1": ("interval '90' day", "interval '60' day"),
              "q3": ("c_mktsegment = 'BUILDING'", "c_mktsegment = 'MACHINERY'")}


def tpch(scale: float, work: Path) -> list[float]:
    """Preview against apply on TPC-H views: added, then modified (see the docstring)."""
    sys.path.insert(0, str(ROOT))
    from bench.tpch_bench import SLICED, TABLES, generate, project, slice_file

    data = generate(work, scale, 10)
    ratios = []
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder) / "tpch"
        project(root, "incremental")
        (root / "reconcile.yaml").write_text(
            "spark:\n  master: local[2]\n  conf: {spark.driver.memory: 6g}\n")
        for table in TABLES:
            sources = ([slice_file(data, table, part) for part in range(1, 11)]
                       if table in SLICED else [data / f"{table}.parquet"])
            for source in sources:
                os.link(source, root / "input" / table / source.name)
        spec = root / "pipelines/tpch/pipeline.yaml"
        spec.write_text(spec.read_text().replace("sql: [tables.sql, views.sql]",
                                                 "sql: [tables.sql]"))
        every = (root / "pipelines/tpch/views.sql").read_text()
        chosen = [block for block in every.split("\n\n")
                  if any(block.startswith(f"CREATE VIEW {view} AS") for view in TPCH_VIEWS)]
        reconcile(root, "apply", "--auto-approve")
        reconcile(root, "run")
        (root / "pipelines/tpch/views.sql").write_text(";\n\n".join(
            block.rstrip().rstrip(";") for block in chosen) + ";\n")
        spec.write_text(spec.read_text().replace("sql: [tables.sql]",
                                                 "sql: [tables.sql, views.sql]"))
        print(f"TPC-H at scale {scale:g}: {', '.join(TPCH_VIEWS)} added")
        ratios.append(_preview_against_apply(root))
        sql = root / "pipelines/tpch/views.sql"
        text = sql.read_text()
        for old, new in TPCH_EDITS.values():
            assert old in text, old
            text = text.replace(old, new)
        sql.write_text(text)
        print(f"TPC-H: {', '.join(TPCH_EDITS)} modified")
        ratios.append(_preview_against_apply(root))
    return ratios


def _preview_against_apply(root: Path) -> float:
    preview_seconds, output = timed(root, "plan", "--preview", "--json")
    apply_seconds, _ = timed(root, "apply", "--auto-approve")
    [pipeline] = json.loads(output)["pipelines"]
    for view, counts in pipeline["preview"]["views"].items():
        shown = {key: value for key, value in counts.items() if key != "nulls"}
        print(f"  {view}: {shown}")
    ratio = preview_seconds / apply_seconds
    print(f"  plan --preview: {preview_seconds:.1f} s; apply: {apply_seconds:.1f} s; "
          f"ratio {ratio:.2f} (goal <= {GOAL}): {'met' if ratio <= GOAL else 'NOT met'}",
          flush=True)
    return ratio


def grades(rows: int) -> list[float]:
    """Preview against apply on the seed story with `rows` grades."""
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder) / "grades"
        shutil.copytree(ROOT / "examples/grades", project,
                        ignore=shutil.ignore_patterns(".reconcile"))
        reconcile(project, "apply", "--auto-approve")
        reconcile(project, "execute", "-p", "grades",
                  (project / "story/students.sql").read_text())
        reconcile(project, "execute", "-p", "grades", (
            "INSERT INTO grades SELECT id % 100000 AS student_id, concat('c', id % 7) AS class, "
            "CAST(40 + id % 60 AS DECIMAL(5,2)) AS grade, "
            "date_add(date'2025-09-01', CAST(id % 280 AS INT)) AS class_date "
            f"FROM range({rows})"))
        spec = project / "pipelines/grades/pipeline.yaml"
        spec.write_text(spec.read_text().replace("2025-12-15", "2026-06-10"))
        sql = project / "pipelines/grades/program.sql"
        sql.write_text(sql.read_text() + (project / "story/new_view.sql").read_text())

        preview_seconds, output = timed(project, "plan", "--preview", "--json")
        preview_seconds_warm, _ = timed(project, "plan", "--preview", "--json")
        bootstrap_seconds, _ = timed(project, "apply", "--auto-approve")
    [pipeline] = json.loads(output)["pipelines"]
    ratio = min(preview_seconds, preview_seconds_warm) / bootstrap_seconds
    print(f"grades: {rows:,} rows; preview of "
          f"{', '.join(pipeline['preview']['views'])}")
    for view, counts in pipeline["preview"]["views"].items():
        shown = {key: value for key, value in counts.items() if key != "nulls"}
        print(f"  {view}: {shown}")
    print(f"plan --preview: {preview_seconds:.1f} s (again: {preview_seconds_warm:.1f} s)")
    print(f"apply (bootstrap of the same views): {bootstrap_seconds:.1f} s")
    print(f"ratio preview / bootstrap: {ratio:.2f} (goal <= {GOAL}): "
          f"{'met' if ratio <= GOAL else 'NOT met'}")
    return [ratio]


if __name__ == "__main__":
    main()
