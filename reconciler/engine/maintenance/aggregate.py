"""The aggregate rule: GROUP BY (or global, or DISTINCT) with COUNT, SUM, AVG, MIN, MAX.

Each group keeps a row of state beside the view (a Delta table of its own):
the group keys `__k<j>`, the group's row count `__rows` (its Z-set weight),
and per aggregate `i` what makes it updatable by addition:

    COUNT(*)      __rows
    COUNT(x)      __c<i> = Σ w·[x IS NOT NULL]
    SUM(x)        __s<i> = Σ w·x   and __c<i> (SUM is NULL when no x is)
    AVG(x)        __s<i>, __c<i>  (the result is Spark's: sum / count, same types)
    MIN/MAX(x)    __m<i>

A step adds the change's contributions (`w` = +1 inserted, -1 deleted) to the
state of the groups it touches, and the view's change is, for those groups
only, the old output rows deleted and the new ones inserted (identical rows
cancel). A MIN or MAX cannot be updated by a deletion (the next smallest value
is not in the state), so when the source's change deletes rows, the touched
groups' state is computed again from the source as it stands, read for those
groups only (`_regrouped`); the groups the step did not touch keep theirs.

`__s<i>` has SUM's own type (DECIMAL(p+10,s) for DECIMAL(p,s)), so
sums stay exact, and AVG over DECIMAL divides exactly as Spark's AVG does
(DECIMAL(p+4,s+4)). A grouped view drops a group whose `__rows` reaches 0; a
global aggregate always has its one row, as SQL says.
"""

from __future__ import annotations

from typing import Literal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from sqlglot import exp

from reconciler.desired.shapes import Aggregate, Linear
from reconciler.desired.sql import DIALECT
from reconciler.engine.maintenance.change import change_of
from reconciler.engine.maintenance.frames import StepFrames
from reconciler.engine.maintenance.linear import contents_sql
from reconciler.engine.maintenance.zset import ZSet, positional, union_all
from reconciler.engine.merge import null_safe_equal

WEIGHT = "__w"
OLD = "__old"
OLD_ROWS = f"{OLD}__rows"


def keys_of(shape: Aggregate) -> list[str]:
    return [f"__k{j}" for j in range(shape.keys)]


def initial_state(frames: StepFrames, shape: Aggregate) -> DataFrame:
    """Every group's state computed from the relations as they stand (bootstrap)."""
    source = shape.source
    query = source.branches[0] if isinstance(source, Linear) else source.select
    rows = frames.spark.sql(contents_sql(frames, query))
    return _kept(_contributions(rows.withColumn(WEIGHT, F.lit(1)), shape), shape)


def aggregate_change(frames: StepFrames, shape: Aggregate, state: DataFrame,
                     view_schema: T.StructType) -> tuple[ZSet, ZSet] | None:
    """This step's change of the view (the touched groups' rows after as inserted, before as
    deleted: `ZSet.net` cancels the rows that did not move) and of its state; None when the
    input did not change the groups at all (no row of the source select changed)."""
    change = change_of(frames, shape.source)
    signed = _signed(change)
    if signed is None:
        return None
    if change.deletes is not None and has_min_max(shape):
        return _regrouped(frames, shape, state, signed, view_schema)
    added = _contributions(signed, shape)
    keys = keys_of(shape)
    touched = state.join(added.select(*keys), null_safe_equal(
        [(state[key], added[key]) for key in keys]), "left_semi") if keys else state
    # One row per touched group, its state before (`__old` columns, NULL for a new group)
    # beside the contributions: computed once, on the executors (as small as the change),
    # and read by the merge, the old rows and the state's change.
    both = _beside(added, touched, shape, "left").localCheckpoint()
    before_state = both.where(F.col(OLD_ROWS).isNotNull()).select(
        *(F.col(f"{OLD}{field.name}").alias(field.name) for field in state.schema.fields))
    merged = _kept(_merge(both, shape, state.schema), shape)
    before = output_rows(frames, shape, before_state, argument_types(signed), view_schema)
    after = output_rows(frames, shape, merged, argument_types(signed), view_schema)
    return (ZSet(inserts=after, deletes=before),  # the touched groups' rows, before netting
            ZSet(inserts=merged, deletes=before_state))


def merged_state(frames: StepFrames, shape: Aggregate, state: DataFrame
                 ) -> tuple[DataFrame, dict[str, T.DataType]] | None:
    """Every group's state after this step, lazily: the old state and the change's
    contributions joined by group (full outer: untouched groups keep their row), added up,
    groups without rows dropped; with the aggregate arguments' types (for `output_rows`).
    None when no row of the source select changed.

    For a small state this is the cheap way: one job reads the state whole, computes the
    contributions and writes the new state, where finding and rewriting the touched groups
    (`aggregate_change`) takes a job to compute them and more to apply them."""
    signed = _signed(change_of(frames, shape.source))
    if signed is None:
        return None
    added = _contributions(signed, shape)
    merged = _kept(_merge(_beside(added, state, shape, "full"), shape, state.schema), shape)
    return merged, argument_types(signed)


def argument_types(signed: DataFrame) -> dict[str, T.DataType]:
    """The type of each aggregate's argument (`__a<i>`) in the source rows."""
    return {field.name: field.dataType for field in signed.schema.fields}


def has_min_max(shape: Aggregate) -> bool:
    return any(call.function in ("min", "max") for call in shape.calls)


def _regrouped(frames: StepFrames, shape: Aggregate, state: DataFrame, signed: DataFrame,
               view_schema: T.StructType) -> tuple[ZSet, ZSet]:
    """The change of a MIN/MAX aggregate whose source deleted rows: the touched groups' state
    computed again from the source's rows of those groups (after the step), replacing their
    old state; the view's change is their old rows against their new ones. A global
    aggregate has one group, always touched: its state is computed from every row."""
    keys = keys_of(shape)
    source = shape.source
    query = source.branches[0] if isinstance(source, Linear) else source.select
    rows = frames.spark.sql(contents_sql(frames, query))
    before_state = state
    if keys:
        touched = signed.select(*keys).distinct()
        rows = rows.join(touched, null_safe_equal([(rows[key], touched[key]) for key in keys]),
                         "left_semi")
        before_state = state.join(touched, null_safe_equal(
            [(state[key], touched[key]) for key in keys]), "left_semi")
    fresh = _kept(_contributions(rows.withColumn(WEIGHT, F.lit(1)), shape), shape)
    fresh = fresh.select(*(F.col(field.name).cast(field.dataType).alias(field.name)
                           for field in state.schema.fields)).localCheckpoint()
    arguments = argument_types(signed)
    return (ZSet(inserts=output_rows(frames, shape, fresh, arguments, view_schema),
                 deletes=output_rows(frames, shape, before_state, arguments, view_schema)),
            ZSet(inserts=fresh, deletes=before_state))


def _signed(source: ZSet) -> DataFrame | None:
    """The source select's changed rows with their weight (+1 inserted, -1 deleted)."""
    return union_all([
        None if source.inserts is None else source.inserts.withColumn(WEIGHT, F.lit(1)),
        None if source.deletes is None else source.deletes.withColumn(WEIGHT, F.lit(-1))])


def output_rows(frames: StepFrames, shape: Aggregate, state: DataFrame,
                arguments: dict[str, T.DataType], view_schema: T.StructType) -> DataFrame:
    """The view's rows for the groups in `state`: its select list over each group's values."""
    values = state.select(*keys_of(shape), "__rows", *(
        _value(i, call.function, arguments.get(f"__a{i}")).alias(f"__agg{i}")
        for i, call in enumerate(shape.calls)))
    query = exp.select(*(item.copy() for item in shape.output)).from_(frames.temporary(values))
    conditions = [] if shape.is_global else [exp.column("__rows") > 0]
    if shape.having is not None:
        conditions.append(shape.having.copy())
    if conditions:
        query = query.where(exp.and_(*conditions))
    return positional(frames.spark.sql(query.sql(dialect=DIALECT)), view_schema)


def _value(i: int, function: str, argument: T.DataType | None) -> Column:
    count = F.col(f"__c{i}")
    if function == "count":
        return F.col("__rows") if argument is None else count
    if function in ("min", "max"):
        return F.col(f"__m{i}")
    total = F.col(f"__s{i}")
    if function == "sum":
        return F.when(count > 0, total)
    if isinstance(argument, T.DecimalType):  # Spark's Average on DECIMAL(p,s), step for step
        result = T.DecimalType(min(argument.precision + 4, 38), min(argument.scale + 4, 38))
        return F.when(count > 0, (total / count.cast(T.DecimalType(20, 0))).cast(result))
    return F.when(count > 0, total.cast("double") / count.cast("double"))


def _contributions(signed: DataFrame, shape: Aggregate) -> DataFrame:
    """Per group, what the weighted rows add to its state."""
    weight = F.col(WEIGHT)
    columns = [F.coalesce(F.sum(weight), F.lit(0)).cast("long").alias("__rows")]
    for i, call in enumerate(shape.calls):
        argument = F.col(f"__a{i}")
        if call.function in ("count", "sum", "avg") and call.argument is not None:
            columns.append(F.coalesce(F.sum(F.when(argument.isNotNull(), weight)), F.lit(0))
                           .cast("long").alias(f"__c{i}"))
        if call.function in ("sum", "avg"):
            columns.append(F.sum(F.when(weight > 0, argument).otherwise(-argument))
                           .alias(f"__s{i}"))
        if call.function in ("min", "max"):
            columns.append((F.min if call.function == "min" else F.max)(argument)
                           .alias(f"__m{i}"))
    return signed.groupBy(*keys_of(shape)).agg(*columns)


def _beside(added: DataFrame, state: DataFrame, shape: Aggregate,
            how: Literal["left", "full"]) -> DataFrame:
    """The contributions with each group's old state beside them (`__old<column>`): for the
    groups that have contributions (`left`), or for every group of either (`full`)."""
    old = state.select(*(F.col(name).alias(f"{OLD}{name}") for name in state.columns))
    keys = keys_of(shape)
    if not keys:  # a global aggregate: its one row of state
        return added.crossJoin(old)
    return added.join(old, null_safe_equal([(added[key], old[f"{OLD}{key}"]) for key in keys]),
                      how)


def _merge(both: DataFrame, shape: Aggregate, schema: T.StructType) -> DataFrame:
    """Old state plus contributions, per group, in the state's own types (a new group's
    old state is NULL: its contributions alone; a group without contributions, its old
    state: its `__rows`, never NULL where it has some, is NULL)."""
    types = {field.name: field.dataType for field in schema.fields}
    contributed = F.col("__rows").isNotNull()
    keys = [F.when(contributed, F.col(key)).otherwise(F.col(f"{OLD}{key}")).alias(key)
            for key in keys_of(shape)]
    columns = []
    for name in _values(both, shape):
        mine, old = F.col(name), F.col(f"{OLD}{name}")
        if name.startswith("__m"):
            value = (F.least if _is_min(shape, name) else F.greatest)(mine, old)  # skip NULL
        else:
            value = F.when(old.isNull(), mine).when(mine.isNull(), old).otherwise(mine + old)
        columns.append(value.cast(types.get(name, both.schema[name].dataType)).alias(name))
    return both.select(*keys, *columns)


def _values(both: DataFrame, shape: Aggregate) -> list[str]:
    """The state's value columns (after its keys), as the contributions name them."""
    return [name for name in both.columns[shape.keys:] if not name.startswith(OLD)]


def _is_min(shape: Aggregate, name: str) -> bool:
    return shape.calls[int(name[3:])].function == "min"


def _kept(state: DataFrame, shape: Aggregate) -> DataFrame:
    """Groups with rows left (a global aggregate keeps its one row regardless)."""
    return state if shape.is_global else state.where(F.col("__rows") != 0)

