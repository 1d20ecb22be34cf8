"""Linear and join rules: projections, filters, UNION ALL and inner joins.

A select over one relation is linear: `Δ(Q(R)) = Q(ΔR)`, so the view's own
query runs on the change alone (inserted rows and deleted rows separately, see
`zset`). A join is bilinear; for relations `R1 ... Rn` joined in one select,

    Δ(R1 ⋈ ... ⋈ Rn) = Σ_i  R1' ⋈ ... ⋈ R(i-1)' ⋈ ΔRi ⋈ R(i+1) ⋈ ... ⋈ Rn

where `R'` is the relation after this step's change and `R` before it (the
version the last manifest pinned). With one changed relation that is one term:
new fact rows joined with the dimensions as they stand (Spark broadcasts the
small side). A term for each side of each changed relation is the view's query
with its relations renamed to those versions; each keeps its alias (or its
own name as alias), so every column reference still resolves. UNION ALL adds
up its branches' changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame
from sqlglot import exp

from reconciler.desired.analysis.keyed import Equated, occurrences
from reconciler.desired.analysis.shapes import tables_of
from reconciler.desired.parsing.sql import DIALECT
from reconciler.engine.maintenance.frames import Part, Range, Side, StepFrames
from reconciler.engine.maintenance.zset import ZSet, union_all


def select_change(frames: StepFrames, select: exp.Select, equated: Equated) -> ZSet:
    """The change of one select (inner joins, filters, projections) in this step.

    In each term, an occurrence joined to the changed one by an equality reads only the
    rows within the change's range of that column (`equated`, found with the shape): a
    term over a few new orders reads the lineitems of their key range, and Parquet skips
    the files outside it where the table is clustered on the key (compaction does it)."""
    occurrences = tables_of(select)
    inserts: list[DataFrame] = []
    deletes: list[DataFrame] = []
    sides: tuple[tuple[Side, list[DataFrame]], ...] = (("inserts", inserts),
                                                       ("deletes", deletes))
    for position, occurrence in enumerate(occurrences):
        change = frames.changes.get(occurrence.name.lower())
        if change is None:
            continue
        for side, found in sides:
            if getattr(change, side) is None:
                continue
            parts: list[Part] = [
                "new" if index < position and other.name.lower() in frames.changes else "old"
                for index, other in enumerate(occurrences)]
            parts[position] = side
            views = [_version(frames, other, part, _ranges(frames, equated, occurrence, side,
                                                           other))
                     for other, part in zip(occurrences, parts, strict=True)]
            found.append(frames.spark.sql(rename_relations(select, views)))
    return ZSet(union_all(inserts), union_all(deletes))


def _ranges(frames: StepFrames, equated: Equated,
            changed: exp.Table, side: Side, other: exp.Table) -> tuple[Range, ...]:
    """The ranges `other` is restricted to in the term where `changed` reads `side`: per
    column of `other` equated to one of `changed`, that column's range in the change."""
    if other is changed:
        return ()
    ranges: list[Range] = []
    for members in equated:
        mine = [column for table, column in members if table is changed]
        theirs = [column for table, column in members if table is other]
        if mine and theirs:
            found = frames.value_range(changed.name.lower(), side, mine[0])
            if found is not None:
                ranges.extend((column, found[1], found[2]) for column in theirs)
    return tuple(ranges)


def _version(frames: StepFrames, occurrence: exp.Table, part: Part,
             ranges: tuple[Range, ...]) -> str:
    relation = occurrence.name.lower()
    return frames.within(relation, part, ranges) if ranges else frames.name(relation, part)


def rename_relations(select: exp.Select, views: list[str]) -> str:
    """The select's SQL with its i-th relation occurrence (FROM, then each JOIN) reading
    temporary view `views[i]`."""
    return _renamed_sql(select, tables_of, views)


def rename_occurrences(query: exp.Expression, views: list[str]) -> str:
    """The query's SQL with its i-th relation occurrence anywhere (subqueries included, in
    `occurrences` order) reading temporary view `views[i]`."""
    return _renamed_sql(query, occurrences, views)


def _renamed_sql(query: exp.Expression, find: Callable[[Any], list[exp.Table]],
                 views: list[str]) -> str:
    """Each occurrence keeps its alias (or its own name as alias), so every column
    reference still resolves."""
    copy = query.copy()
    for occurrence, view in zip(find(copy), views, strict=True):
        if not occurrence.alias:
            occurrence.set("alias", exp.TableAlias(this=exp.to_identifier(
                occurrence.name.lower())))
        occurrence.set("this", exp.to_identifier(view))
        occurrence.set("db", None)
        occurrence.set("catalog", None)
    return copy.sql(dialect=DIALECT)


def contents_sql(frames: StepFrames, query: exp.Expression) -> str:
    """SQL of the query over the new version of every relation (a from-scratch result)."""
    return rename_occurrences(query, [frames.name(table.name.lower(), "new")
                                      for table in occurrences(query)])
