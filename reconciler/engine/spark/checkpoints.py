"""Frames computed once and kept on the executors, counted by the job that computes them.

The engine checkpoints a frame it will read several times (a step's change, the rows a
DELETE removes), and often needs to know whether it holds any row: an empty change goes
no further. Asking afterwards (`isEmpty`, `count`) is a second Spark job; metrics
observed on the checkpoint's own job (Spark's `observe`, aggregates over the rows
flowing through an action) give the count without one.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from reconciler.engine.spark.session import is_connect

OBSERVED = "__reconciler_checkpoint"
"""The name of the metrics a checkpoint observes (unique within its own plan)."""


def checkpointed(frame: DataFrame, *metrics: Column) -> tuple[DataFrame, list[int | None]]:
    """`frame` computed and kept on the executors (an eager `localCheckpoint`), with
    `metrics` (aggregates over its rows, such as a count) taken by the same job.

    The metrics are read from the checkpoint's own query execution when its job ends
    (`observedMetrics`), not through an `Observation`: that one is completed through
    Spark's listener bus, which drops events when its queue is full, and its `get` would
    then wait forever. Over Spark Connect (no JVM here), or if the execution reports no
    metrics, each is None."""
    unknown: list[int | None] = [None] * len(metrics)
    if is_connect(frame.sparkSession):
        return frame.localCheckpoint(eager=True), unknown
    observed = frame.observe(OBSERVED, *(metric.alias(f"m{i}") for i, metric in
                                         enumerate(metrics)))
    kept = observed.localCheckpoint(eager=True)
    found = observed._jdf.queryExecution().observedMetrics().get(OBSERVED)  # a Scala Option
    if found.isEmpty():
        return kept, unknown
    row = found.get()
    return kept, [row.get(i) for i in range(len(metrics))]


def counted(frame: DataFrame) -> tuple[DataFrame, int | None]:
    """`frame` checkpointed, and its rows counted by the same job (None over Connect)."""
    kept, [rows] = checkpointed(frame, F.count(F.lit(1)))
    return kept, rows


def unless_empty(frame: DataFrame) -> DataFrame | None:
    """`frame` checkpointed, or None when it holds no row: one job (two over Connect)."""
    kept, rows = counted(frame)
    if rows is None:
        return None if kept.isEmpty() else kept
    return kept if rows else None
