"""The floor under a maintained step: what the writes alone cost, whatever the rules.

A maintained view's step ends in a Delta write of its change (and an aggregate's
in a second one, of its state): a Spark job that writes a few rows as Parquet,
then a delta-rs commit. Each job has a fixed cost (planning, scheduling, the
commit protocol's folders and renames) that no rule can avoid, so the number of
writes a step makes bounds how fast it can be. This measures that bound on the
real storage: `--tables` small Delta tables (default 40: TPC-H's 20 maintained
views and their states) each get an 8-row append per step, `--workers` at once
(as `engine/refresh.py` refreshes views), and prints per step the wall time, the
time per write, and how it splits between Spark's write and delta-rs' commit.

Usage: `python bench/write_floor.py [--tables 40] [--workers 2] [--steps 6]`.
Compare a step's time with `bench/tpch_bench.py`'s refresh phase: a 2-core machine
took 3.3 to 4.4 s for 40 writes, about a ninth of recomputing TPC-H's views at scale 1,
and 1.7 to 2.3 s for 20 (`--tables 20`: one write per maintained view).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6)
    args = parser.parse_args()
    from pyspark.sql import functions as F

    import reconciler.engine.delta.writers as writers_module
    from reconciler.desired.settings.project import SparkSettings
    from reconciler.engine.delta.storage import DeltaStorage
    from reconciler.engine.spark.session import get_spark

    spark = get_spark(SparkSettings(conf={"spark.driver.memory": "8g"}))
    storage = DeltaStorage(spark)
    seconds: dict[str, float] = defaultdict(float)

    def timed(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*arguments: Any, **options: Any) -> Any:
            started = time.perf_counter()
            try:
                return function(*arguments, **options)
            finally:
                seconds[name] += time.perf_counter() - started
        return wrapper

    # Timed where the engine's own commits call them (`DeltaRsWriter`).
    writers_module.write_files = timed("spark write", writers_module.write_files)  # type: ignore[attr-defined]  # patched where it is used
    writers_module.commit_files = timed("delta-rs commit", writers_module.commit_files)  # type: ignore[attr-defined]  # patched where it is used

    def rows(first: int, count: int) -> Any:
        return spark.range(first, first + count).select(
            F.col("id").alias("k"), (F.col("id") * 3).cast("decimal(18,2)").alias("v"),
            F.lit("x").alias("label"))

    root = Path(tempfile.mkdtemp(prefix="write-floor-"))
    paths = [str(root / f"t{i}") for i in range(args.tables)]
    for path in paths:  # a view's worth of rows to start from
        storage.overwrite(path, rows(0, 5000), rows(0, 1).schema)
    print(f"{args.tables} tables, 8-row appends, {args.workers} at once")
    for step in range(args.steps):
        seconds.clear()
        started = time.perf_counter()
        first = 10_000 + step * 8
        with ThreadPoolExecutor(args.workers) as pool:  # each write its own query, as a view's
            list(pool.map(lambda path, first=first: storage.append(path, rows(first, 8)), paths))
        wall = time.perf_counter() - started
        print(f"step {step + 1}: {wall:.2f} s, {wall / args.tables * args.workers:.2f} s per "
              f"write; summed over workers: Spark {seconds['spark write']:.1f} s, delta-rs "
              f"{seconds['delta-rs commit']:.1f} s", flush=True)


if __name__ == "__main__":
    main()
