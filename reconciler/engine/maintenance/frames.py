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

import itertools
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, Literal

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reconciler.engine.maintenance.zset import ZSet
from reconciler.engine.spark.schema import quoted

Part = Literal["old", "new", "inserts", "deletes"]
Side = Literal["inserts", "deletes"]
Range = tuple[str, Any, Any]  # column, lowest and highest value (None, None: no value)
SIDE_COLUMN = "__side"
RANGED_TYPES = (T.IntegralType, T.StringType, T.DateType, T.DecimalType)
"""Types whose min and max come back to Python and go back to Spark as the same value (a
TIMESTAMP would pass through the driver's time zone, a float's NaN does not compare)."""
_FIT = {T.DateType: "{0} >= DATE'0001-01-01' AND {1} <= DATE'9999-12-31'",
        T.StringType: "is_valid_utf8({0}) AND is_valid_utf8({1})"}
"""When a column's min and max come back as they are: a date of Python's years (Spark's
reach from -5877641 to +5881580, and Spark's filter on a date literal near its first day
overflows), a string of valid UTF-8 (a Parquet input may hold other bytes, which would
come back replaced by U+FFFD and compare otherwise). A range that does not fit is no
range (issue 78): no value of a row can fail the step or narrow a read wrongly."""


@dataclass
class StepFrames:
    """Old and new versions and changes of a step's relations, by temporary-view name."""

    spark: SparkSession
    old: Callable[[str], DataFrame]
    new: Callable[[str], DataFrame]
    changes: dict[str, ZSet] = field(default_factory=dict)
    _id: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    _registered: set[str] = field(default_factory=set)
    _counter: Iterator[int] = field(default_factory=itertools.count)
    _ranges: dict[tuple[str, Side], dict[str, Range | None]] = field(default_factory=dict)
    _within: dict[tuple[str, Part, tuple[Range, ...]], str] = field(default_factory=dict)

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
        side: DataFrame | None = getattr(self.changes[relation], part)
        assert side is not None, f"no {part} for {relation}"
        return side

    def value_range(self, relation: str, side: Side, column: str) -> Range | None:
        """The lowest and highest `column` of one side of `relation`'s change, or None when
        its type does not travel (`RANGED_TYPES`). One job per relation and step finds every
        column's on both sides (one aggregated row per side), as the terms of several views
        ask for several, and a join's terms ask for both sides."""
        if (relation, side) not in self._ranges:
            self._find_ranges(relation)
        return self._ranges[relation, side][column.lower()]

    def _find_ranges(self, relation: str) -> None:
        change = self.changes[relation]
        ranged: dict[Side, list[str]] = {}
        rows: list[DataFrame] = []
        for side in ("inserts", "deletes"):
            frame = getattr(change, side)
            if frame is None:
                continue
            ranged[side] = [field.name for field in frame.schema.fields
                            if isinstance(field.dataType, RANGED_TYPES)]
            self._ranges[relation, side] = {field.name.lower(): None
                                            for field in frame.schema.fields}
            if ranged[side]:
                rows.append(frame.agg(F.lit(side).alias(SIDE_COLUMN), *(
                    aggregate for field in frame.schema.fields if field.name in ranged[side]
                    for aggregate in _bounds(field))))
        if not rows:
            return
        both = reduce(lambda one, other: one.unionByName(other, allowMissingColumns=True), rows)
        for found in both.collect():  # small: one row per side, a min and max per column
            side = found[SIDE_COLUMN]
            for name in ranged[side]:
                if found[f"__fits_{name}"] is False:
                    continue  # no range: the whole relation is read, as for other types
                self._ranges[relation, side][name.lower()] = (
                    name, found[f"__min_{name}"], found[f"__max_{name}"])

    def within(self, relation: str, part: Part, ranges: tuple[Range, ...]) -> str:
        """The temporary view of `part` of `relation` with only the rows whose columns lie in
        `ranges` (NULL in none): Parquet skips the files and row groups outside them."""
        if (relation, part, ranges) not in self._within:
            frame = self._frame(relation, part)
            condition = F.lit(True)
            for column, low, high in ranges:
                condition = condition & in_range(frame[column], low, high)
            self._within[relation, part, ranges] = self.temporary(frame.where(condition))
        return self._within[relation, part, ranges]

    def close(self) -> None:
        """Drop this step's temporary views (a long-lived Connect session keeps them)."""
        for view in self._registered:
            self.spark.catalog.dropTempView(view)
        self._registered.clear()

    def temporary(self, frame: DataFrame) -> str:
        """Register an intermediate result under a fresh name, for a SQL query over it."""
        view = f"__{self._id}_t{next(self._counter)}"  # threads share it: `next` is atomic
        frame.createOrReplaceTempView(view)
        self._registered.add(view)
        return view


def _bounds(field: T.StructField) -> list[Column]:
    """A column's min, max and whether they fit (`_FIT`), the bounds NULL where they do
    not, so that no value Python cannot hold comes back."""
    name = quoted(field.name)
    low, high = F.min(F.col(name)), F.max(F.col(name))
    test = next((test for kind, test in _FIT.items() if isinstance(field.dataType, kind)),
                None)
    fits = F.lit(True) if test is None else F.expr(test.format(f"min({name})", f"max({name})"))
    return [F.when(fits, low).alias(f"__min_{field.name}"),
            F.when(fits, high).alias(f"__max_{field.name}"),
            fits.alias(f"__fits_{field.name}")]


def in_range(column: Column, low: Any, high: Any, nulls: bool = False) -> Column:
    """`column` between `low` and `high` (no value when both are None), or NULL if `nulls`."""
    inside = F.lit(False) if low is None else column.between(low, high)
    return inside | column.isNull() if nulls else inside
