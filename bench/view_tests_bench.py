"""What `reconcile test` costs next to starting the embedded Spark session it runs on.

Issue 35's goal: `reconcile test` on the examples in under 2x the embedded session's
start time. Both are measured in fresh processes, as a user runs them (best of
`--repeat`):

1. the session start: `get_spark(master="local[2]")` and a first one-row job;
2. `reconcile -C examples/<name> test` for each example with tests (the process's
   whole wall time: Python start, the session, every test computed, recomputed and
   maintained through its change).

Printed: each time and the ratio of each example's run to the session start.

Usage: `python bench/view_tests_bench.py [--repeat 3]` (`make bench-view-tests`).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GOAL = 2.0
SESSION_START = (
    "from reconciler.engine.spark.session import get_spark\n"
    "get_spark(master='local[2]').range(1).count()\n")


def wall(argv: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stdout}{done.stderr}")
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    repeat = parser.parse_args().repeat
    session = min(wall([sys.executable, "-c", SESSION_START]) for _ in range(repeat))
    print(f"embedded session start (fresh process, one job): {session:.1f} s")
    ratios = []
    for example in sorted(path.parent.parent.parent
                          for path in (ROOT / "examples").glob("*/pipelines/*/tests")):
        seconds = min(wall([sys.executable, "-m", "reconciler", "-C", str(example), "test"])
                      for _ in range(repeat))
        ratios.append(seconds / session)
        print(f"reconcile test, examples/{example.name}: {seconds:.1f} s "
              f"({ratios[-1]:.2f}x the session start; goal < {GOAL:g}x)")
    sys.exit(0 if max(ratios) < GOAL else 1)


if __name__ == "__main__":
    main()
