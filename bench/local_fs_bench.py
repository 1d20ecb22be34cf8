"""The orders example on local storage, with Hadoop's local file system and with the one
that sets permissions without a `chmod` process (`engine/spark/local_fs.py`).

Each round runs the same commands in two fresh processes, one per file system: `apply`,
a first `run`, one `run` per new month of orders and an idle `run`, through the real CLI
in process (one JVM per variant and round). The variants differ only in their jar cache:
Hadoop's runs with a copy of the cache (links to the same jars) that lacks the compiled
class, so its sessions use Hadoop's own class, as a set-up without `javac` would. The
`apply` starts the JVM and is not timed; the runs (steps) are.

Usage: `python bench/local_fs_bench.py [ROUNDS]` (`make bench-local-fs`, 3 rounds).
Needs `make jars` (the compiled class). Prints each round and the ratio of the medians.
"""

from __future__ import annotations

import json
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

from reconciler.engine.spark.jars import jar_folder  # noqa: E402

MONTHS = ("2026-03.json", "2026-04.json")


def child() -> None:
    """One variant's commands in this process; prints its seconds as JSON."""
    from click.testing import CliRunner

    from reconciler.cli.main import cli

    def command(project: Path, *args: str) -> None:
        result = CliRunner().invoke(cli, ["-C", str(project), *args], catch_exceptions=False)
        if result.exit_code != 0:
            raise SystemExit(f"reconcile {' '.join(args)} failed:\n{result.output}")

    with tempfile.TemporaryDirectory() as scratch:
        project = Path(scratch) / "orders"
        shutil.copytree(ROOT / "examples" / "orders", project,
                        ignore=shutil.ignore_patterns(".reconcile", "output"))
        command(project, "apply", "--auto-approve")  # starts the JVM: not timed
        started = time.perf_counter()
        command(project, "run")
        for month in MONTHS:
            shutil.copy(project / "incoming" / month, project / "data" / "orders" / month)
            command(project, "run")
        command(project, "run")
        print(json.dumps({"seconds": time.perf_counter() - started}))


def jar_cache_without(cache: Path, into: Path, left_out: str) -> Path:
    """A jar cache with links to every entry of `cache` but `left_out` (what the set-up
    made there: `local-fs`, `class-archive`), as a set-up that could not make it leaves."""
    into.mkdir()
    for entry in cache.iterdir():
        if entry.name != left_out:
            (into / entry.name).symlink_to(entry)
    return into


def timed(cache: Path) -> float:
    env = {**os.environ, "RECONCILE_JARS": str(cache), "RECONCILE_PROGRESS": "off"}
    result = subprocess.run([sys.executable, __file__, "--child"], capture_output=True,
                            text=True, env=env, check=False)
    if result.returncode != 0:
        raise SystemExit(f"a round failed:\n{result.stderr[-3000:]}")
    return float(json.loads(result.stdout.strip().splitlines()[-1])["seconds"])


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    cache = jar_folder()
    if not (cache / "local-fs").is_dir():
        raise SystemExit("no compiled local file system in the jar cache: run `make jars`")
    with tempfile.TemporaryDirectory() as scratch:
        hadoops = jar_cache_without(cache, Path(scratch) / "jars", "local-fs")
        print(f"{'round':<8}{'Hadoop s':>10}{'forkless s':>12}")
        hadoop, forkless = [], []
        for number in range(1, rounds + 1):
            hadoop.append(timed(hadoops))
            forkless.append(timed(cache))
            print(f"{number:<8}{hadoop[-1]:>10.2f}{forkless[-1]:>12.2f}")
    print(f"median  {statistics.median(hadoop):>10.2f}{statistics.median(forkless):>12.2f}   "
          f"forkless/Hadoop {statistics.median(forkless) / statistics.median(hadoop):.2f}x")


if __name__ == "__main__":
    if sys.argv[1:] == ["--child"]:
        child()
    else:
        main()
