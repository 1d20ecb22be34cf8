"""Outer joins (LEFT, RIGHT, FULL) of two relations, maintained by the keys a step touches.

An outer join is not linear — a match arriving for a left row retracts that row's
NULL-padded output — but every output row depends only on the input rows that
share its join key. So the change is the select recomputed over just those rows,
before and after the step:

    K  = the join-key values of this step's changed rows (both sides, NULLs too)
    Δ  = Q(L'|K, R'|K) - Q(L|K, R|K)      (R|K: the rows of R whose key is in K)

`L|K` is a semi-join with `K`, null-safe, so rows whose key is NULL (never
matched) come along too: they cancel out unless they changed. The work follows
the rows of the touched keys, not the relations.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from reconciler.engine.maintenance.frames import StepFrames
from reconciler.engine.maintenance.linear import rename_relations
from reconciler.engine.maintenance.zset import ZSet
from reconciler.spec.maintenance import Keyed, tables_of

KEY = "__key"


def keyed_change(frames: StepFrames, shape: Keyed) -> ZSet:
    """The change of a `Keyed` select in this step (empty when no input of it changed)."""
    relations = [table.name.lower() for table in tables_of(shape.select)]
    touched = [side.select(F.col(column).alias(KEY))
               for relation, column in zip(relations, shape.keys, strict=True)
               for change in [frames.changes.get(relation)] if change is not None
               for side in (change.inserts, change.deletes) if side is not None]
    if not touched:
        return ZSet()
    keys = reduce(DataFrame.union, touched).distinct().localCheckpoint(eager=True)
    before, after = (
        frames.spark.sql(rename_relations(shape.select, [
            frames.temporary(_restricted(frames.old(relation) if part == "old"
                                         else frames.new(relation), column, keys))
            for relation, column in zip(relations, shape.keys, strict=True)]))
        for part in ("old", "new"))
    return ZSet.between(before, after)


def _restricted(frame: DataFrame, column: str, keys: DataFrame) -> DataFrame:
    """The rows of `frame` whose `column` is one of `keys` (NULL included)."""
    return frame.join(keys, frame[column].eqNullSafe(keys[KEY]), "left_semi")
