"""A 2-row `reconcile execute` step of the seed story in a warm process (issue 53's goal: 1.5 s).

The grades example (Feldera's bootstrapping story, `examples/grades`) is applied and its
students inserted, then `reconcile execute -p grades "INSERT INTO grades VALUES (..), (..)"`
runs `--steps` times through the CLI in one process (one JVM, as a notebook or the
continuous runner keeps it), each with two new grades. Printed per step: wall time and the
Spark jobs it ran (the scheduler's count, which does not depend on the machine's load);
then the median of the steps after `--warm-up`.

Usage: `python bench/execute_bench.py [--steps 8] [--warm-up 3]`.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
GOAL_SECONDS = 1.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warm-up", type=int, default=3)
    arguments = parser.parse_args()

    from click.testing import CliRunner

    from reconciler.cli.main import cli

    with tempfile.TemporaryDirectory(prefix="execute-bench-") as folder:
        project = Path(folder) / "grades"
        shutil.copytree(ROOT / "examples" / "grades", project,
                        ignore=shutil.ignore_patterns(".reconcile"))
        runner = CliRunner()

        def reconcile(*args: str) -> None:
            result = runner.invoke(cli, ["-C", str(project), *args], catch_exceptions=False)
            assert result.exit_code == 0, result.output

        reconcile("apply", "--auto-approve")
        reconcile("execute", "-p", "grades",
                  (project / "story" / "students.sql").read_text())
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
        assert spark is not None, "the CLI keeps its session in the process"

        def jobs() -> int:
            return int(spark.sparkContext._jsc.sc().dagScheduler().numTotalJobs())

        seconds = []
        for step in range(arguments.steps):
            day = f"2026-0{1 + step % 9}-1{step % 10}"
            statement = (f"INSERT INTO grades VALUES (1, 'algebra', {60 + step}, '{day}'), "
                         f"(2, 'physics', {70 + step}, '{day}')")
            before, start = jobs(), time.perf_counter()
            reconcile("execute", "-p", "grades", statement)
            seconds.append(time.perf_counter() - start)
            counted = step - arguments.warm_up + 1
            label = "warm-up" if counted < 1 else f"step {counted}"
            print(f"{label:>8}: {seconds[-1]:5.2f} s  {jobs() - before} Spark jobs", flush=True)
        median = statistics.median(seconds[arguments.warm_up:])
        print(f"2-row execute, warm process: median {median:.2f} s (goal <= {GOAL_SECONDS} s)")


if __name__ == "__main__":
    main()
