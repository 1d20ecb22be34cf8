"""What a data preview costs next to the bootstrap it previews, on the seed story at scale.

The grades example with `--rows` grades (default 2,000,000, over 100,000 students and
7 classes) inserted through `reconcile execute`; then the seed story's change (the end
date moved, a new view). In one process, so the JVM is warm for both:

1. `reconcile plan --preview --json`: counts for `avg_grade` (modified, keyed),
   `avg_grade_enriched` (downstream) and `avg_grade_all_courses` (new);
2. `reconcile apply --auto-approve`: the bootstrap of the same three views.

Printed: both times and their ratio (the issue's goal: at most 1.2x), and the preview's
counts. The preview runs with Spark's default settings; nothing is collected but counts.

Usage: `python bench/preview_bench.py [--rows 2000000]` (`make bench-preview`).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from click.testing import CliRunner

from reconciler.cli import cli

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
    rows = parser.parse_args().rows
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
    sys.exit(0 if ratio <= GOAL else 1)


if __name__ == "__main__":
    main()
