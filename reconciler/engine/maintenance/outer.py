"""The keyed rule: a query recomputed over only the keys a step touches.

Outer joins, `EXISTS`/`NOT EXISTS`, `IN (subquery)` and correlated subqueries are
not linear — a match arriving for a left row retracts its NULL-padded output, the
last matching row leaving flips a `NOT EXISTS` — but when every row the query
combines shares one key (`spec/keyed.py` finds it) the change is the query over
just the touched keys, before and after the step:

    K  = the key values of this step's changed rows (every keyed occurrence, NULLs too)
    Δ  = Q(R'|K) - Q(R|K)      (R|K: the rows of R whose key is in K)

`R|K` is a semi-join with `K`, null-safe, so rows whose key is NULL come along
when a changed row's key was NULL: they cancel out unless they changed. The work
follows the rows of the touched keys, not the relations. Occurrences read whole
(outside the key) are constants while their relation is unchanged; a step that
changes one compares the whole query, old against new.
"""

from __future__ import annotations

from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from reconciler.engine.maintenance.frames import Part, StepFrames, in_range
from reconciler.engine.maintenance.linear import rename_occurrences
from reconciler.engine.maintenance.zset import ZSet
from reconciler.spec.keyed import Keyed, occurrences

KEY = "__key"


def keyed_change(frames: StepFrames, shape: Keyed) -> ZSet:
    """The change of a `Keyed` query in this step (empty when no input of it changed)."""
    relations = [table.name.lower() for table in occurrences(shape.select)]
    if not any(relation in frames.changes for relation in relations):
        return ZSet()
    if any(key is None and relation in frames.changes
           for relation, key in zip(relations, shape.keys, strict=True)):
        # A relation read whole changed: no key bounds the change, compare the whole query.
        versions = [[frames.name(relation, part) for relation in relations]
                    for part in ("old", "new")]
    else:
        versions = _restricted_versions(frames, shape, relations)
    # Each side computed once and kept on the executors: both differences read both.
    before, after = (frames.spark.sql(rename_occurrences(shape.select, views))
                     .localCheckpoint(eager=True) for views in versions)
    return ZSet.between(before, after)


def _restricted_versions(frames: StepFrames, shape: Keyed,
                         relations: list[str]) -> list[list[str]]:
    """Per part (old, new), the temporary view each relation occurrence reads: the rows
    of the touched keys, or the whole relation when it is read whole (and unchanged)."""
    touched = [side.select(F.col(key).alias(KEY))
               for relation, key in zip(relations, shape.keys, strict=True)
               if key is not None and relation in frames.changes
               for side in (frames.changes[relation].inserts, frames.changes[relation].deletes)
               if side is not None]
    keys = reduce(DataFrame.union, touched).distinct().localCheckpoint(eager=True)
    # The touched keys' range: a filter on it lets Parquet skip the files outside it
    # before the semi-join, where the table is clustered on the key (compaction does it).
    # One aggregated row, never the keys themselves.
    low, high, nulls = keys.agg(F.min(KEY), F.max(KEY), F.max(F.col(KEY).isNull())).first()
    restricted: dict[tuple[str, str, Part], str] = {}

    def version(relation: str, key: str | None, part: Part) -> str:
        if key is None:
            return frames.name(relation, "new")  # unchanged this step: old and new agree
        if (relation, key, part) not in restricted:
            # Lazy, not checkpointed: the query's own filters reach the scan this way (a
            # materialized key range would hold every row of the keys, filtered or not).
            frame = frames.old(relation) if part == "old" else frames.new(relation)
            restricted[relation, key, part] = frames.temporary(
                frame.where(in_range(frame[key], low, high, nulls)).join(
                    keys, frame[key].eqNullSafe(keys[KEY]), "left_semi"))
        return restricted[relation, key, part]
    return [[version(relation, key, part) for relation, key in
             zip(relations, shape.keys, strict=True)] for part in ("old", "new")]
