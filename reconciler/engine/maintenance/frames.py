"""The versions of each relation a step's maintenance reads, as temporary views.

A Z-set rule evaluates the view's own SQL with some relations replaced by their
old version (pinned by the last manifest), their new version (after this
step's writes) or one side of their change. Each is registered once per step
under a name no pipeline relation can have (`__<id>_<part>_<relation>`):
unique per step because Spark Connect resolves a temporary view when a query
runs, not when it is built, so a name must never be re-pointed while a
DataFrame built on it is alive.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from pyspark.sql import DataFrame, SparkSession

from reconciler.engine.maintenance.zset import ZSet

Part = Literal["old", "new", "inserts", "deletes"]


@dataclass
class StepFrames:
    """Old and new versions and changes of a step's relations, by temporary-view name."""

    spark: SparkSession
    old: Callable[[str], DataFrame]
    new: Callable[[str], DataFrame]
    changes: dict[str, ZSet] = field(default_factory=dict)
    _id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    _registered: set[str] = field(default_factory=set)

    def name(self, relation: str, part: Part) -> str:
        """The temporary view holding `part` of `relation`, registered on first use."""
        view = f"__{self._id}_{part}_{relation}"
        if view not in self._registered:
            self._frame(relation, part).createOrReplaceTempView(view)
            self._registered.add(view)
        return view

    def _frame(self, relation: str, part: Part) -> DataFrame:
        if part == "old":
            return self.old(relation)
        if part == "new":
            return self.new(relation)
        side = getattr(self.changes[relation], part)
        assert side is not None, f"no {part} for {relation}"
        return side

    def close(self) -> None:
        """Drop this step's temporary views (a long-lived Connect session keeps them)."""
        for view in self._registered:
            self.spark.catalog.dropTempView(view)
        self._registered.clear()

    def temporary(self, frame: DataFrame) -> str:
        """Register an intermediate result under a fresh name, for a SQL query over it."""
        view = f"__{self._id}_t{len(self._registered)}"
        frame.createOrReplaceTempView(view)
        self._registered.add(view)
        return view
