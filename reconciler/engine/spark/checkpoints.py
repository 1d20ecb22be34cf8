"""Frames computed once and kept on the executors, counted by the job that computes them.

The engine checkpoints a frame it will read several times (a step's change, the rows a
DELETE removes), and often needs to know whether it holds any row: an empty change goes
no further. Asking afterwards (`isEmpty`, `count`) is a second Spark job; an
`Observation` on the checkpoint's own job gives the count for nothing, as Spark's
`observe` reads metrics off the rows flowing through an action.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F


def checkpointed(frame: DataFrame, *metrics: Column) -> tuple[DataFrame, list[int | None]]:
    """`frame` computed and kept on the executors (an eager `localCheckpoint`), with
    `metrics` (aggregates over its rows, such as a count) taken by the same job.

    Over Spark Connect the metrics are not asked for (each is None): there the checkpoint
    is a command of its own, and whether it reports observed metrics is not documented."""
    if type(frame.sparkSession).__module__.startswith("pyspark.sql.connect"):
        return frame.localCheckpoint(eager=True), [None] * len(metrics)
    observation = Observation()
    kept = frame.observe(observation, *(metric.alias(f"m{i}") for i, metric in
                                        enumerate(metrics))).localCheckpoint(eager=True)
    found = observation.get  # set as the checkpoint's job ends
    return kept, [found[f"m{i}"] for i in range(len(metrics))]


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
