"""The change of a select without state of its own: `Linear`, `Keyed` or `Derived`.

An aggregate's rows, a derived table and a view of one of these shapes all take
their change from here. A derived table's change is computed by its own rule,
then the outer select (linear over it) runs on each side, as a `Linear` select
runs on a table's change.
"""

from __future__ import annotations

from functools import partial

from pyspark.sql import DataFrame
from sqlglot import exp

from reconciler.desired.analysis.keyed import Keyed, from_of
from reconciler.desired.analysis.shapes import Derived, Linear, Source
from reconciler.desired.parsing.sql import DIALECT
from reconciler.engine.maintenance.frames import StepFrames
from reconciler.engine.maintenance.linear import select_change
from reconciler.engine.maintenance.outer import keyed_change
from reconciler.engine.maintenance.zset import ZSet, union_all


def change_of(frames: StepFrames, shape: Source, stored: DataFrame | None = None) -> ZSet:
    """This step's change of a stateless shape (columns by position, as its SQL names them).
    `stored`: the view's contents when `shape` is a whole view (a keyed view's deleted rows
    are taken from them, `keyed_change`)."""
    if isinstance(shape, Linear):
        changes = [select_change(frames, branch, equated)
                   for branch, equated in zip(shape.branches, shape.equated, strict=True)]
        return ZSet(union_all(change.inserts for change in changes),
                    union_all(change.deletes for change in changes))
    if isinstance(shape, Keyed):
        return keyed_change(frames, shape, stored)
    inner = change_of(frames, shape.inner)
    return inner.each_side(partial(_over, frames, shape))


def _over(frames: StepFrames, shape: Derived, rows: DataFrame) -> DataFrame:
    """The outer select of `shape` over `rows` in place of its derived table."""
    derived = from_of(shape.select)
    assert isinstance(derived, exp.Subquery)
    alias = derived.args.get("alias")
    names = [column.name for column in alias.columns] if alias is not None else []
    view = frames.temporary(rows.toDF(*names) if names else rows)
    query = shape.select.copy()
    table = exp.to_table(view)
    table.set("alias", exp.TableAlias(this=exp.to_identifier(derived.alias_or_name
                                                            or "__derived")))
    from_of(query).replace(table)  # type: ignore[union-attr]  # a select over a derived table
    return frames.spark.sql(query.sql(dialect=DIALECT))
