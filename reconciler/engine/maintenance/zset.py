"""Z-sets: a relation's change in one step, as rows inserted and rows deleted.

DBSP writes a change as one collection of rows with integer weights. Here the
two signs are kept as two DataFrames (multisets): a linear query distributes
over them (`Q(ins - del) = Q(ins) - Q(del)`), so each is evaluated by the
view's own SQL, unmodified, and no weight column ever meets a `SELECT *`. A
side that is statically empty is `None`: a step that only appends never runs a
job for deletions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import reduce

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reconciler.engine.spark.checkpoints import checkpointed, counted

OP_COLUMN = "_op"
"""The column an output connector's changelog marks each row with: `insert` or `delete`."""
WEIGHT = "__weight"


@dataclass(frozen=True)
class ZSet:
    """Rows inserted and rows deleted (each a multiset, `None` when none can exist)."""

    inserts: DataFrame | None = None
    deletes: DataFrame | None = None
    rows: int | None = None
    """How many rows both sides hold, when counted as they were computed (`net`)."""

    @staticmethod
    def between(old: DataFrame | None, new: DataFrame) -> ZSet:
        """The change that turns `old` into `new`, computed (a full comparison: for recomputed
        views and rewritten files)."""
        return ZSet(inserts=new, deletes=old).net()

    @staticmethod
    def pending(old: DataFrame | None, new: DataFrame) -> ZSet:
        """The change that turns `old` into `new`, left lazy: each side a multiset difference
        computed only if something reads it. For a change that nothing reads in this step (no
        view reads the relation, no output sends it), where `between` would run a job for
        nothing."""
        if old is None:
            return ZSet(inserts=new)
        return ZSet(inserts=new.exceptAll(old), deletes=old.exceptAll(new))

    def net(self) -> ZSet:
        """The net change, computed once and kept on the executors (`localCheckpoint`).

        A change is read several times (to apply it, by each output, by every reader and
        their readers); without this each read would replay the whole chain of rules that
        produced it, so a chain of n views would cost n² jobs. Never collected: the rows
        stay where Spark computed them.

        The job that computes the change also counts each side (`checkpointed`): a side
        with no rows becomes `None`, so a change that nets to nothing is statically empty
        from here on. Nothing applies it, no output writes it, and no reader computes a
        change from it. A filtered view that an input batch leaves alone costs its step
        one job, not a write and its readers' work.

        A row both inserted and deleted (by two terms of a join's change, say: a new fact
        matched to a dimension row this step deletes; or the same output row before and
        after a step) cancels out, as DBSP adds weights; applying deletions before
        insertions would otherwise keep it. One job with one shuffle: each distinct row's
        weight (+1 per inserted copy, -1 per deleted one) is summed, and a row of weight w
        comes back |w| times on its side. That is `inserts EXCEPT ALL deletes` and
        `deletes EXCEPT ALL inserts` (the same grouping semantics: NULLs equal) without
        shuffling both sides twice."""
        if self.inserts is None or self.deletes is None:  # one side: nothing cancels
            (inserts, inserted), (deletes, deleted) = map(_kept, (self.inserts, self.deletes))
            return ZSet(inserts, deletes, rows=_total([inserted, deleted]))
        names = self.inserts.columns
        numbered = [f"__c{i}" for i in range(len(names))]
        signed = self.inserts.toDF(*numbered).withColumn(WEIGHT, F.lit(1)).union(
            self.deletes.toDF(*numbered).withColumn(WEIGHT, F.lit(-1)))
        weighed = signed.groupBy(*numbered).agg(F.sum(WEIGHT).alias(WEIGHT)).where(
            F.col(WEIGHT) != 0)
        copies = F.explode(F.array_repeat(F.lit(0), F.abs(F.col(WEIGHT)).cast("int")))
        sides = (F.col(WEIGHT) > 0, F.col(WEIGHT) < 0)  # inserted, deleted
        both, signs = checkpointed(weighed.select(*numbered, WEIGHT, copies.alias("__copy")),
                                   *(F.count(F.when(side, 1)) for side in sides))
        inserts, deletes = (_if_any(both.where(side).select(
            *(F.col(column).alias(name) for column, name in zip(numbered, names, strict=True))),
            count) for side, count in zip(sides, signs, strict=True))
        return ZSet(inserts, deletes, rows=_total(signs))

    def each_side(self, transform: Callable[[DataFrame], DataFrame]) -> ZSet:
        """Both sides through `transform` (a side that cannot exist stays None); the rows it
        yields are not counted."""
        inserts, deletes = (None if side is None else transform(side)
                            for side in (self.inserts, self.deletes))
        return ZSet(inserts, deletes)

    @property
    def is_empty(self) -> bool:
        return self.inserts is None and self.deletes is None

    def changes(self) -> DataFrame | None:
        """Both sides as one changelog with `_op` = insert/delete (an output's rows)."""
        return union_all(side.withColumn(OP_COLUMN, F.lit(op)) for side, op in
                         ((self.deletes, "delete"), (self.inserts, "insert")) if side is not None)


def _kept(side: DataFrame | None) -> tuple[DataFrame | None, int | None]:
    """One side checkpointed and counted (None when it holds no row, or cannot exist)."""
    if side is None:
        return None, 0
    kept, rows = counted(side)
    return _if_any(kept, rows), rows


def _if_any(frame: DataFrame, rows: int | None) -> DataFrame | None:
    """`frame`, unless it was counted and holds no row (a side that is not there)."""
    return None if rows == 0 else frame


def _total(counts: list[int | None]) -> int | None:
    known = [count for count in counts if count is not None]
    return sum(known) if len(known) == len(counts) else None


def union_all(frames: Iterable[DataFrame | None]) -> DataFrame | None:
    """The multiset union of the frames that exist (by position), or None when none do."""
    present = [frame for frame in frames if frame is not None]
    return reduce(DataFrame.union, present) if present else None


def positional(df: DataFrame, schema: T.StructType) -> DataFrame:
    """`df`'s columns, by position, named and typed as `schema` (a view's stored columns).

    A query's own output names can repeat (`SELECT t.a, u.a`) or be Spark's generated
    ones (`count(1)`), so columns are matched by position, as an INSERT would.
    """
    numbered = df.toDF(*(f"__c{i}" for i in range(len(df.columns))))
    return numbered.select(*(F.col(f"__c{i}").cast(field.dataType).alias(field.name)
                             for i, field in enumerate(schema.fields)))
