"""Commands as a user runs them, each its own process and JVM, with and without the class
archive embedded JVMs start from (`engine/spark/class_archive.py`).

Each round runs, per variant, `reconcile test` on the grades example, then `apply` and a
first `run` on the orders example, each a fresh `python -m reconciler` process timed from
start to exit (the JVM's start included: that is what the archive shortens). The variants
differ only in their jar cache: the one without runs on a copy of the cache (links to the
same jars) that lacks `class-archive/`, as a set-up run with `--no-class-archive` leaves.

Usage: `python bench/class_archive_bench.py [ROUNDS]` (`make bench-class-archive`, 3
rounds). Needs `make jars` (the archive). Prints each round and the ratio of the medians.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.local_fs_bench import jar_cache_without  # noqa: E402
from reconciler.engine.spark.jars import class_archive_file, jar_folder  # noqa: E402

COMMANDS = (("grades", ("test",)), ("orders", ("apply", "--auto-approve")),
            ("orders", ("run",)))


def timed_commands(cache: Path) -> list[float]:
    """Each of `COMMANDS` in a fresh process on fresh copies of the examples: seconds each."""
    env = {**os.environ, "RECONCILE_JARS": str(cache), "RECONCILE_PROGRESS": "off"}
    seconds = []
    with tempfile.TemporaryDirectory() as scratch:
        for example in dict.fromkeys(example for example, _ in COMMANDS):
            shutil.copytree(ROOT / "examples" / example, Path(scratch) / example,
                            ignore=shutil.ignore_patterns(".reconcile", "output"))
        for example, args in COMMANDS:
            started = time.perf_counter()
            result = subprocess.run([sys.executable, "-m", "reconciler", "-C",
                                     str(Path(scratch) / example), *args],
                                    capture_output=True, text=True, env=env, check=False)
            seconds.append(time.perf_counter() - started)
            if result.returncode != 0:
                raise SystemExit(f"reconcile {' '.join(args)} failed:\n{result.stderr[-3000:]}")
    return seconds


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    archive = class_archive_file()
    if archive is None or not archive.is_file():
        raise SystemExit("no class archive in the jar cache: run `make jars`")
    names = [args[0] for _, args in COMMANDS]
    header = "".join(f"{name:>9}" for name in names)
    print(f"{'round':<7}{'without:':<9}{header}  total   {'with:':<6}{header}  total")
    without, with_archive = [], []
    with tempfile.TemporaryDirectory() as scratch:
        plain = jar_cache_without(jar_folder(), Path(scratch) / "jars", "class-archive")
        for number in range(1, rounds + 1):
            before, after = timed_commands(plain), timed_commands(jar_folder())
            without.append(sum(before))
            with_archive.append(sum(after))
            print(f"{number:<7}{'':<9}{''.join(f'{s:>9.2f}' for s in before)}"
                  f"{without[-1]:>7.2f}   {'':<6}{''.join(f'{s:>9.2f}' for s in after)}"
                  f"{with_archive[-1]:>7.2f}")
    print(f"median total: without {statistics.median(without):.2f} s, with "
          f"{statistics.median(with_archive):.2f} s: "
          f"{statistics.median(with_archive) / statistics.median(without):.2f}x")


if __name__ == "__main__":
    main()
