"""The CLI's start: `--help`, `--version`, `validate` and `plan` of the examples, each in a
fresh process as a person or a script runs them, against issue 56's goals.

Why: every command pays the interpreter's start and the imports before it parses its
arguments. `reconcile --help` and `--version` should answer in under 0.3 s, `validate` and
`plan` of an example project (no Spark, a local state folder) in under 1 s.

Usage: `python bench/cli_bench.py [--repeat 7]` (`make bench-cli`). Prints the median
seconds of each command and its ratio to the goal (at most 1.0 meets it).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RECONCILE = [sys.executable, "-m", "reconciler"]


def seconds(command: list[str], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    repeat = parser.parse_args().repeat
    with tempfile.TemporaryDirectory(prefix="cli-bench-") as folder:
        cases = [("--help", [*RECONCILE, "--help"], 0.3),
                 ("--version", [*RECONCILE, "--version"], 0.3)]
        for example in ("grades", "orders"):
            project = Path(folder) / example
            shutil.copytree(ROOT / "examples" / example, project,
                            ignore=shutil.ignore_patterns(".reconcile", "output"))
            cases += [(f"validate {example}", [*RECONCILE, "-C", str(project), "validate"], 1.0),
                      (f"plan {example}", [*RECONCILE, "-C", str(project), "plan"], 1.0)]
        for name, command, goal in cases:
            median = seconds(command, repeat)
            print(f"{name:<18} {median:6.3f} s  goal {goal:.1f} s  ratio {median / goal:.2f}",
                  flush=True)


if __name__ == "__main__":
    main()
