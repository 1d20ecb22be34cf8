"""The aggregate rule: GROUP BY (or global, or DISTINCT) with COUNT, SUM, AVG, MIN, MAX.

Each group keeps a row of state beside the view (a Delta table of its own):
the group keys `__k<j>`, the group's row count `__rows` (its Z-set weight),
and per aggregate `i` what makes it updatable by addition:

    COUNT(*)      __rows
    COUNT(x)      __c<i> = Σ w·[x IS NOT NULL]
    SUM(x)        __s<i> = Σ w·x   and __c<i> (SUM is NULL when no x is)
    AVG(x)        __s<i>, __c<i>  (the result is Spark's: sum / count, same types)
    MIN/MAX(x)    __m<i>
    COUNT(DISTINCT x)  __d<i>
    STDDEV/VARIANCE(x) __c<i>, __s<i>, __q<i> = Σ w·x²: exact for integers and decimals
                  (integers as DECIMAL(20,0)); the result n·Q - S² over n(n-1) (or n²)
                  in double, NULL for fewer than 2 rows (1 for the population forms)

A step adds the change's contributions (`w` = +1 inserted, -1 deleted) to the
state of the groups it touches, and the view's change is, for those groups
only, the old output rows deleted and the new ones inserted (identical rows
cancel). A MIN or MAX cannot be updated by a deletion (the next smallest value
is not in the state), so when the source's change deletes rows, the touched
groups' state is computed again from the source as it stands, read for those
groups only (`_regrouped`); the groups the step did not touch keep theirs. A
COUNT(DISTINCT) cannot be updated by any change without the values seen (is the
inserted value new to its group? is the deleted one its last?), so its touched
groups are recomputed so at every step their source changes.

ROLLUP, CUBE and GROUPING SETS (`desired/analysis/grouping_sets.py`) keep one state row per
group of each grouping set, told apart by one more key, `__g` (Spark's grouping id);
the contributions are grouped by Spark's own `groupingSets`, in one pass. Recomputing
touched groups then reads the whole source (the coarsest set needs every row).

`__s<i>` has SUM's own type (DECIMAL(p+10,s) for DECIMAL(p,s)), so
sums stay exact, and AVG over DECIMAL divides exactly as Spark's AVG does
(DECIMAL(p+4,s+4)). A grouped view drops a group whose `__rows` reaches 0; a
global aggregate always has its one row, as SQL says.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Literal

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from sqlglot import exp

from reconciler.desired.analysis.shapes import Aggregate, Linear
from reconciler.desired.parsing.sql import DIALECT
from reconciler.engine.delta.merge import null_safe_equal
from reconciler.engine.maintenance.change import change_of
from reconciler.engine.maintenance.frames import StepFrames
from reconciler.engine.maintenance.linear import contents_sql
from reconciler.engine.maintenance.writes import Changed, Recomputed, Rewritten, StateChange, Update
from reconciler.engine.maintenance.zset import ZSet, positional, union_all

WEIGHT = "__w"
OLD = "__old"
OLD_ROWS = f"{OLD}__rows"


def keys_of(shape: Aggregate) -> list[str]:
    """The state's key columns: the group keys, and the grouping id with grouping sets."""
    return [f"__k{j}" for j in range(shape.keys)] + (["__g"] if shape.sets else [])


def regroups(shape: Aggregate, *, deletes: bool) -> bool:
    """Whether a step whose source change deletes rows (`deletes`) or not recomputes the
    touched groups (`_regrouped`) instead of adding the change's contributions."""
    return any(call.function == "count_distinct" or (deletes and call.function in ("min", "max"))
               for call in shape.calls)


def source_rows(frames: StepFrames, shape: Aggregate) -> DataFrame:
    """The source select's rows over the relations as they stand (lazy)."""
    source = shape.source
    query = source.branches[0] if isinstance(source, Linear) else source.select
    return frames.spark.sql(contents_sql(frames, query))


def initial_state(frames: StepFrames, shape: Aggregate) -> DataFrame:
    """Every group's state computed from the relations as they stand (bootstrap)."""
    return _kept(_contributions(source_rows(frames, shape).withColumn(WEIGHT, F.lit(1)), shape),
                 shape)


def computed_from_state(shape: Aggregate) -> bool:
    """Whether the view's rows must be computed from its state from the start: a STDDEV or
    VARIANCE from sums differs in its last bits from Spark's own, and a step deletes a
    group's old row by its exact value."""
    return any(call.function in _SPREAD for call in shape.calls)


def aggregate_update(frames: StepFrames, shape: Aggregate, state: DataFrame,
                     view_schema: T.StructType, *, reads: Sequence[str],
                     small: Callable[[], bool]) -> Update:
    """What this step writes for a maintained aggregate view whose state is `state`. A small
    one (`small()`, asked only when it could be) is rewritten whole: its new state (the old
    one plus the change's contributions), then its rows from that state, two jobs. Any
    other, and one whose touched groups are recomputed this step (`_regroups_now`), takes
    its change and its state's change (the touched groups only). One with windows over its
    groups (`Aggregate.windowed`) is always rewritten whole from its new state (touched
    groups recomputed where they must be): a window's rows depend on every group of their
    partition. Either way the source select's change is taken once, here."""
    source = change_of(frames, shape.source)
    regroups_now = _regroups_now(frames, shape, reads)
    if not regroups_now and (shape.windowed or small()):
        merged = merged_state(shape, state, source)
        if merged is None:
            return Changed(ZSet())
        new_state, arguments = merged
        return Rewritten(new_state, partial(output_rows, frames, shape, arguments=arguments,
                                            view_schema=view_schema))
    if shape.windowed:  # a window can move any group's row: every group's, from the state
        signed = _signed(source)
        if signed is None:
            return Changed(ZSet())
        fresh = _regrouped(frames, shape, state, signed, view_schema)[1].inserts
        assert fresh is not None  # `_regrouped` computes both sides
        keys = keys_of(shape)
        # The touched groups as `_regrouped` finds them (not from the state: a self-join)
        touched = (_contributions(signed, shape) if shape.sets else signed).select(*keys)
        new_state = _among(state, touched, keys, "left_anti").unionByName(fresh) if keys \
            else fresh  # a global aggregate's one group
        return Rewritten(new_state, partial(output_rows, frames, shape,
                                            arguments=argument_types(signed),
                                            view_schema=view_schema))
    changed = aggregate_change(frames, shape, state, source, view_schema)
    if changed is None:
        return Changed(ZSet())
    view_change, state_change = changed[0].net(), changed[1]  # state: computed
    assert state_change.inserts is not None and state_change.deletes is not None
    return Changed(view_change, StateChange(state_change.inserts, state_change.deletes,
                                            unique_by=keys_of(shape)))


def recomputed(frames: StepFrames, shape: Aggregate, contents: DataFrame) -> Recomputed:
    """The view computed whole (`contents`: its own query) with the state it starts from
    its inputs as they stand; a STDDEV/VARIANCE view's rows are computed from that state
    instead (`computed_from_state`)."""
    if computed_from_state(shape):
        state = initial_state(frames, shape).localCheckpoint()  # read twice, computed once
        arguments = argument_types(source_rows(frames, shape))
        return Recomputed(output_rows(frames, shape, state, arguments, contents.schema), state)
    return Recomputed(contents, initial_state(frames, shape))


def _regroups_now(frames: StepFrames, shape: Aggregate, reads: Sequence[str]) -> bool:
    """Whether this step recomputes the touched groups (`regroups`: a COUNT(DISTINCT), or a
    MIN/MAX whose source may delete rows): then the state cannot be rewritten by adding
    contributions, and `aggregate_change` does it."""
    if not regroups(shape, deletes=True):
        return False
    if regroups(shape, deletes=False) or not isinstance(shape.source, Linear):
        return True  # keyed and derived sources retract rows
    return any(frames.changes[read].deletes is not None for read in reads
               if read in frames.changes)


def aggregate_change(frames: StepFrames, shape: Aggregate, state: DataFrame, source: ZSet,
                     view_schema: T.StructType) -> tuple[ZSet, ZSet] | None:
    """This step's change of the view (the touched groups' rows after as inserted, before as
    deleted: `ZSet.net` cancels the rows that did not move) and of its state, from the
    source select's change (`source`); None when no row of the source select changed."""
    signed = _signed(source)
    if signed is None:
        return None
    if regroups(shape, deletes=source.deletes is not None):
        return _regrouped(frames, shape, state, signed, view_schema)
    added = _contributions(signed, shape)
    keys = keys_of(shape)
    touched = _among(state, added.select(*keys), keys) if keys else state
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


def merged_state(shape: Aggregate, state: DataFrame, source: ZSet
                 ) -> tuple[DataFrame, dict[str, T.DataType]] | None:
    """Every group's state after this step, lazily: the old state and the change's
    contributions joined by group (full outer: untouched groups keep their row), added up,
    groups without rows dropped; with the aggregate arguments' types (for `output_rows`).
    None when no row of the source select changed (`source`, its change).

    For a small state this is the cheap way: one job reads the state whole, computes the
    contributions and writes the new state, where finding and rewriting the touched groups
    (`aggregate_change`) takes a job to compute them and more to apply them."""
    signed = _signed(source)
    if signed is None:
        return None
    added = _contributions(signed, shape)
    merged = _kept(_merge(_beside(added, state, shape, "full"), shape, state.schema), shape)
    return merged, argument_types(signed)


def argument_types(signed: DataFrame) -> dict[str, T.DataType]:
    """The type of each aggregate's argument (`__a<i>`) in the source rows."""
    return {field.name: field.dataType for field in signed.schema.fields}


def _regrouped(frames: StepFrames, shape: Aggregate, state: DataFrame, signed: DataFrame,
               view_schema: T.StructType) -> tuple[ZSet, ZSet]:
    """The change of an aggregate whose touched groups are recomputed (`regroups`): their
    state computed again from the source's rows of those groups (after the step), replacing
    their old state; the view's change is their old rows against their new ones. A global
    aggregate has one group, always touched: its state is computed from every row; so do
    grouping sets, whose touched groups are kept after grouping every row."""
    keys = keys_of(shape)
    rows = source_rows(frames, shape)
    before_state = state
    touched: DataFrame | None = None
    if shape.sets:
        touched = _contributions(signed, shape).select(*keys).distinct()
    elif keys:
        touched = signed.select(*keys).distinct()
        rows = _among(rows, touched, keys)
    fresh = _kept(_contributions(rows.withColumn(WEIGHT, F.lit(1)), shape), shape)
    if touched is not None:
        before_state = _among(state, touched, keys)
        fresh = _among(fresh, touched, keys) if shape.sets else fresh
    fresh = fresh.select(*(F.col(field.name).cast(field.dataType).alias(field.name)
                           for field in state.schema.fields)).localCheckpoint()
    arguments = argument_types(signed)
    return (ZSet(inserts=output_rows(frames, shape, fresh, arguments, view_schema),
                 deletes=output_rows(frames, shape, before_state, arguments, view_schema)),
            ZSet(inserts=fresh, deletes=before_state))


def _among(rows: DataFrame, groups: DataFrame, keys: list[str],
           how: Literal["left_semi", "left_anti"] = "left_semi") -> DataFrame:
    """The rows of `rows` whose keys are (`left_anti`: are not) those of a row of `groups`
    (NULL equal to NULL)."""
    return rows.join(groups, null_safe_equal([(rows[key], groups[key]) for key in keys]), how)


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
        for i, call in enumerate(shape.calls)), *(  # GROUPING(k_j), as Spark types it
        F.shiftright("__g", shape.keys - 1 - j).bitwiseAND(1).cast("tinyint").alias(f"__grp{j}")
        for j in range(shape.keys) if shape.sets))
    query = exp.select(*(item.copy() for item in shape.output)).from_(frames.temporary(values))
    conditions: list[exp.Expr] = [] if shape.is_global else [exp.column("__rows") > 0]
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
    if function == "count_distinct":
        return F.col(f"__d{i}")
    if function in _SPREAD:
        return _spread(function, count, F.col(f"__s{i}"), F.col(f"__q{i}"))
    total = F.col(f"__s{i}")
    if function == "sum":
        return F.when(count > 0, total)
    if isinstance(argument, T.DecimalType):  # Spark's Average on DECIMAL(p,s), step for step
        result = T.DecimalType(min(argument.precision + 4, 38), min(argument.scale + 4, 38))
        return F.when(count > 0, (total / count.cast(T.DecimalType(20, 0))).cast(result))
    return F.when(count > 0, total.cast("double") / count.cast("double"))


_SPREAD = ("stddev_samp", "stddev_pop", "var_samp", "var_pop")


def _exact(argument: Column, data_type: T.DataType) -> Column:
    """An argument as summed for STDDEV/VARIANCE: integers as decimals (their squares do not
    overflow), decimals as they are, the rest as doubles."""
    if isinstance(data_type, T.DecimalType):
        return argument
    if isinstance(data_type, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        return argument.cast(T.DecimalType(20, 0))
    return argument.cast("double")


def _spread(function: str, count: Column, total: Column, squares: Column) -> Column:
    """Variance from count n, sum S and sum of squares Q: (n·Q - S²) / (n·(n-1)) for the
    sample, / n² for the population (n·Q - S² exact for decimals, then in double); NULL
    where Spark's is (n < 2 for the sample, n = 0 for the population); its root for STDDEV."""
    spread = (count * squares - total * total).cast("double")
    sample = function in ("stddev_samp", "var_samp")
    denominator = (count * (count - 1) if sample else count * count).cast("double")
    variance = F.when(count >= (2 if sample else 1), F.greatest(spread, F.lit(0.0))
                      / denominator)
    return F.sqrt(variance) if function.startswith("stddev") else variance


def _contributions(signed: DataFrame, shape: Aggregate) -> DataFrame:
    """Per group, what the weighted rows add to its state."""
    weight = F.col(WEIGHT)
    columns = [F.coalesce(F.sum(weight), F.lit(0)).cast("long").alias("__rows")]
    for i, call in enumerate(shape.calls):
        argument = F.col(f"__a{i}")
        if call.function not in ("min", "max", "count_distinct") and call.argument is not None:
            columns.append(F.coalesce(F.sum(F.when(argument.isNotNull(), weight)), F.lit(0))
                           .cast("long").alias(f"__c{i}"))
        if call.function in ("sum", "avg"):
            columns.append(F.sum(F.when(weight > 0, argument).otherwise(-argument))
                           .alias(f"__s{i}"))
        if call.function in _SPREAD:
            exact = _exact(argument, signed.schema[f"__a{i}"].dataType)
            signed_value = F.when(weight > 0, exact).otherwise(-exact)
            columns.append(F.sum(signed_value).alias(f"__s{i}"))
            columns.append(F.sum(signed_value * exact).alias(f"__q{i}"))
        if call.function in ("min", "max"):
            columns.append((F.min if call.function == "min" else F.max)(argument)
                           .alias(f"__m{i}"))
        if call.function == "count_distinct":  # rows all +1 here: `regroups` says so
            columns.append(F.count_distinct(argument).alias(f"__d{i}"))
    if shape.sets:
        keys = [f"__k{j}" for j in range(shape.keys)]
        return signed.groupingSets([[keys[j] for j in members] for members in shape.sets],
                                   *keys).agg(F.grouping_id().alias("__g"), *columns)
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
    return [name for name in both.columns[len(keys_of(shape)):] if not name.startswith(OLD)]


def _is_min(shape: Aggregate, name: str) -> bool:
    return shape.calls[int(name[3:])].function == "min"


def _kept(state: DataFrame, shape: Aggregate) -> DataFrame:
    """Groups with rows left (a global aggregate keeps its one row regardless)."""
    return state if shape.is_global else state.where(F.col("__rows") != 0)

