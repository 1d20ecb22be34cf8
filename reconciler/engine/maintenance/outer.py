"""The keyed rule: a query recomputed over only the keys a step touches.

Outer joins, `EXISTS`/`NOT EXISTS`, `IN (subquery)` and correlated subqueries are
not linear — a match arriving for a left row retracts its NULL-padded output, the
last matching row leaving flips a `NOT EXISTS` — but when every row the query
combines shares one key (`desired/analysis/keyed.py` finds it) the change is the query over
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
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from reconciler.desired.analysis.keyed import Keyed, named_columns, occurrences
from reconciler.engine.maintenance.frames import Part, Side, StepFrames, in_range
from reconciler.engine.maintenance.linear import rename_occurrences
from reconciler.engine.maintenance.zset import ZSet

KEY = "__key"


def keyed_change(frames: StepFrames, shape: Keyed, stored: DataFrame | None = None) -> ZSet:
    """The change of a `Keyed` query in this step, unconsolidated: the query over the touched
    keys after the step as inserted rows, before it as deleted ones (`ZSet.net` cancels the
    rows that stayed; an aggregate adds both with their signs). Lazy: its one reader computes
    both sides in one job. Empty when no input of it changed.

    `stored` is the view's contents, when the query is a whole view: its deleted rows are
    then taken from them (all of them when a relation read whole changed; else the rows
    whose key column, `shape.output_key`, is touched) rather than recomputed. A recomputed
    double (a `STDDEV`, a `SUM` of doubles) can differ in its last bits from the stored one,
    and a delete matches whole rows: it would find nothing and leave the old row beside the
    new one."""
    relations = [table.name.lower() for table in occurrences(shape.select)]
    if not any(relation in frames.changes for relation in relations):
        return ZSet()
    def query(views: list[str]) -> DataFrame:
        return frames.spark.sql(rename_occurrences(shape.select, views))
    if any(key is None and relation in frames.changes
           for relation, key in zip(relations, shape.keys, strict=True)):
        # A relation read whole changed: no key bounds the change, compare the whole query.
        old, new = ([frames.name(relation, part) for relation in relations]
                    for part in ("old", "new"))
        return ZSet(inserts=query(new), deletes=query(old) if stored is None else stored)
    touched = _touched_keys(frames, shape, relations)
    old, new = _restricted_versions(frames, shape, relations, touched)
    if stored is not None and shape.output_key is not None:
        column = stored[stored.columns[shape.output_key]]
        return ZSet(inserts=query(new),
                    deletes=stored.join(touched, column.eqNullSafe(touched[KEY]), "left_semi"))
    return ZSet(inserts=query(new), deletes=query(old))


def _touched(frames: StepFrames, shape: Keyed, relations: list[str]
             ) -> list[tuple[str, str, Side]]:
    """Each keyed relation occurrence's change side this step: (relation, key, side)."""
    return [(relation, key, side) for relation, key in zip(relations, shape.keys, strict=True)
            if key is not None and relation in frames.changes
            for side in ("inserts", "deletes")
            if getattr(frames.changes[relation], side) is not None]


def _touched_keys(frames: StepFrames, shape: Keyed, relations: list[str]) -> DataFrame:
    """The key values of this step's changed rows, one column `KEY`, distinct. Lazy: each
    reader reads the key columns of the change's sides again (computed once, and as small
    as the change), rather than a job to keep the keys."""
    keys: DataFrame = reduce(DataFrame.union, [getattr(frames.changes[relation], side).select(
        F.col(key).alias(KEY)) for relation, key, side in _touched(frames, shape, relations)]
        ).distinct()
    return keys


def _restricted_versions(frames: StepFrames, shape: Keyed, relations: list[str],
                         keys: DataFrame) -> list[list[str]]:
    """Per part (old, new), the temporary view each relation occurrence reads: the rows
    of the touched keys, or the whole relation when it is read whole (and unchanged).

    A relation's rows of the touched keys are read once, from its old version, and kept on
    the executors (memory, then disk); the new version's are those less the relation's
    deleted rows plus its inserted ones (every changed row's key is touched), so a step
    reads a big relation once, not once per version and occurrence (TPC-H's Q17 reads
    `lineitem` twice per version). Only the columns the query names are kept (Q20 reads 4
    of `lineitem`'s 16): a column it never names cannot change what a name resolves to."""
    bounds = _key_range(frames, _touched(frames, shape, relations))
    restricted: dict[tuple[str, str], tuple[str, str]] = {}
    named = named_columns(shape.select)  # only these columns are kept

    def versions_of(relation: str, key: str) -> tuple[str, str]:
        if (relation, key) not in restricted:
            frame = frames.old(relation)
            read = [column for column in frame.columns
                    if named is None or column.lower() in named]
            if bounds is not None:  # NULL keys too: the semi-join below is null-safe
                frame = frame.where(in_range(frame[key], *bounds, nulls=True))
            old = frame.join(keys, frame[key].eqNullSafe(keys[KEY]), "left_semi").select(*read)
            old = old.localCheckpoint(eager=True)
            new = _after(old, frame.columns, frames.changes.get(relation))
            restricted[relation, key] = (frames.temporary(old), frames.temporary(new))
        return restricted[relation, key]

    def version(relation: str, key: str | None, part: Part) -> str:
        if key is None:
            return frames.name(relation, "new")  # unchanged this step: old and new agree
        old, new = versions_of(relation, key)
        return old if part == "old" else new
    return [[version(relation, key, part) for relation, key in
             zip(relations, shape.keys, strict=True)] for part in ("old", "new")]


def _key_range(frames: StepFrames, touched: list[tuple[str, str, Side]]) -> tuple[Any, Any] | None:
    """The lowest and highest touched key, from the ranges the step finds of each change side's
    columns (one job per side, shared by every view): a filter on it lets Parquet skip the
    files outside it, where the table is clustered on the key (compaction does it). None
    when a key's type does not travel (`RANGED_TYPES`) or two key columns do not compare."""
    lows, highs = [], []
    for relation, key, side in touched:
        found = frames.value_range(relation, side, key)
        if found is None:
            return None
        if found[1] is not None:  # a side whose keys are all NULL has no range
            lows.append(found[1])
            highs.append(found[2])
    try:
        return (min(lows), max(highs)) if lows else (None, None)
    except TypeError:  # equated columns of types Python does not compare (a string, a number)
        return None


def _after(rows: DataFrame, columns: list[str], change: ZSet | None) -> DataFrame:
    """`rows` (some columns of a relation's old version) with the relation's change (all
    its `columns`) applied: less one copy of each deleted row, plus the inserted ones."""
    if change is None:
        return rows
    deletes, inserts = (None if side is None else side.toDF(*columns).select(*rows.columns)
                        for side in (change.deletes, change.inserts))
    if deletes is not None:
        rows = rows.exceptAll(deletes)
    return rows if inserts is None else rows.union(inserts)
