"""A small step's queries planned as Structured Streaming plans a micro-batch: statically.

Adaptive query execution (AQE) re-plans a query at each shuffle, and to do so Spark runs
every stage that feeds a shuffle or a broadcast as a Spark job of its own, waiting for
it before planning the rest: a maintained view whose change meets its stored state in a
join and an aggregate ran as 4 jobs where a static plan runs 1. Over a step's few
thousand changed rows those re-plannings find nothing to improve (no partition to
coalesce or skew to split in a change that fits a task) and cost what the step costs:
the insert-only step of `bench/step_bench.py`'s four views ran 16 Spark jobs with AQE
and 9 without, ingest included (issue 79). Spark's own streaming engine turns AQE off
for the same reason (`StreamExecution` plans every micro-batch statically).

So a step whose change touched at most `MICRO_BATCH_ROWS` rows (read from the tables'
logs, no Spark job: `DeltaStorage.touched_rows`) runs its maintenance with
`spark.sql.adaptive.enabled=false`, and the operator's value comes back when the step
ends. A larger change (a first load, a backfill, a mass delete) keeps AQE, whose
coalescing and skew handling pay off at that size, and so does a step whose change size
the log cannot tell (a writer that wrote no per-file row counts). The shuffle partitions
stay the operator's (`spark.sql.shuffle.partitions`; an embedded session's are 2).
Joins with a small side are broadcast by the engine's own hints and Spark's static
size estimate, as before.

The setting is the session's, so it holds for every thread of the step (views refresh
in parallel) and for nothing after it; nothing else runs on a pipeline's session during
its step.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession

ADAPTIVE = "spark.sql.adaptive.enabled"
MICRO_BATCH_ROWS = 1_000_000
"""The most rows a step's change may touch to be planned statically (a change this size
fits a few tasks; above it AQE's coalescing and skew handling can pay for its jobs)."""


def is_micro_batch(touched_rows: int | None) -> bool:
    """Whether a change of `touched_rows` rows is a micro-batch (None: size unknown)."""
    return touched_rows is not None and touched_rows <= MICRO_BATCH_ROWS


@contextmanager
def micro_batch(spark: SparkSession, touched_rows: int | None) -> Iterator[bool]:
    """Plan the queries run inside statically when the change is small (yields whether
    it is); the session's own setting is restored afterwards, whatever happens."""
    if not is_micro_batch(touched_rows):
        yield False
        return
    with static_plan(spark):
        yield True


@contextmanager
def static_plan(spark: SparkSession) -> Iterator[None]:
    """Plan the queries run inside statically whatever their size: for a query AQE cannot
    improve at any size (a global aggregate, whose one final task has nothing to
    coalesce or split), whose shuffle it would only run as a job of its own. The
    session's own setting is restored afterwards, whatever happens."""
    previous = spark.conf.get(ADAPTIVE, None)
    spark.conf.set(ADAPTIVE, "false")
    try:
        yield
    finally:
        if previous is None:
            spark.conf.unset(ADAPTIVE)
        else:
            spark.conf.set(ADAPTIVE, previous)
