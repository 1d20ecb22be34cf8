"""What an apply would do to each view's rows, computed read-only from committed state.

For each new or modified view, and each view downstream of one (in dependency
order), the view's query as the pull request writes it runs over the relations at
the versions the committed manifest pins (a view computed earlier in the preview
is read as computed, not as stored), and is compared with what the view holds now:

* a new view: its row count and each column's NULL count (one job);
* any other: rows before and after, rows added and removed as multisets (one job
  over both sides, grouped by every column, with a +1/-1 weight per side);
* a view with a key (its `GROUP BY` columns, all in its output): rows changed (a key
  both added and removed) and per other column how many of them change its value
  (one more job, over the differing rows only);
* with samples asked (`Samples`): up to N rows of each kind (added, removed, changed
  before and after), masked columns as `***`: every column that reads a masked one,
  by column lineage (`desired.model.masking`), whatever its name.

Every view's queries run under the preview's bound (`engine.preview.bound`): a time
limit and a job budget, since the SQL comes from a pull request no one has reviewed;
once it runs out, the running jobs are cancelled and that view and the rest are
`unavailable` with the reason, while the plan itself stands.

Nothing is written: every frame is a query over pinned Delta versions, temporary
views live in the Spark session, and only counts (and the few sample rows asked for)
reach the driver. A table the
change adds reads as empty; a view reading a table the change modifies is not
previewed (its rows after the apply depend on the evolution), and says so.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial, reduce
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from reconciler.desired.model.masking import NO_MASK, ColumnMask
from reconciler.desired.parsing.expectation_clauses import executable_view_query
from reconciler.engine.preview.bound import OutOfBound, PreviewBound
from reconciler.engine.runtime import PipelineRuntime
from reconciler.engine.spark.local_rows import empty_frame
from reconciler.engine.spark.query_rows import text_safe_columns
from reconciler.plan.preview_report import ViewPreview

WEIGHT = "__preview_weight"
NET = "__preview_net"


@dataclass(frozen=True)
class Samples:
    """Sample rows to show (`plan --preview rows`): up to `count` of each kind, and per view
    which columns show as `***` (`desired.model.masking`: by lineage, not by name). Only these
    rows, never a view's contents, reach the driver."""

    count: int = 0
    masks: Mapping[str, ColumnMask] = field(default_factory=dict)

    def of(self, view: str) -> ViewSamples:
        return ViewSamples(self.count, self.masks.get(view, NO_MASK))


@dataclass(frozen=True)
class ViewSamples:
    """One view's sample rows: how many, and which of its columns are masked."""

    count: int
    mask: ColumnMask

    def shown(self, rows: list[Any], names: list[str]) -> list[dict[str, str]]:
        hidden = self.mask.masked(names)
        return [{name: MASKED if masked else "NULL" if value is None else str(value)
                 for name, value, masked in zip(names, row, hidden, strict=True)}
                for row in rows]


MASKED = "***"
def preview_views(runtime: PipelineRuntime, views: list[tuple[str, str]],
                  keys: dict[str, list[str] | None], unavailable: dict[str, str],
                  bound: PreviewBound, samples: Samples = Samples()
                  ) -> dict[str, ViewPreview]:
    """Each (view, kind) of `views` (kind: new, modified or downstream; dependency order)
    compared with its committed contents. `runtime.program` is the desired program,
    `runtime.relations` the committed state; `unavailable` names views that cannot be
    previewed and why (they, and views reading them, are reported as such). Each view's
    queries run under `bound`: once it runs out, that view and the rest say so."""
    computed: dict[str, DataFrame] = {}
    results: dict[str, ViewPreview] = {}
    skipped = dict(unavailable)
    for view, kind in views:
        definition = runtime.program.views[view]
        blocked = next((read for read in definition.reads if read in skipped), None)
        if bound.reason:  # out of time or jobs: no query of the rest runs
            skipped.setdefault(view, bound.reason)
        if view in skipped or blocked is not None:
            skipped.setdefault(view, f"reads {blocked}, which is not previewed")
            results[view] = ViewPreview(kind, unavailable=skipped[view])
            continue
        try:
            results[view] = bound.run(partial(
                _previewed, runtime, view, kind, keys.get(view), computed, samples.of(view)))
        except OutOfBound as stopped:
            skipped[view] = str(stopped)
            results[view] = ViewPreview(kind, unavailable=str(stopped))
    return results


def _previewed(runtime: PipelineRuntime, view: str, kind: str, key: list[str] | None,
               computed: dict[str, DataFrame], samples: ViewSamples) -> ViewPreview:
    """One view's counts (and samples); its query joins `computed` for the views after it."""
    definition = runtime.program.views[view]
    for read in definition.reads:
        _input(runtime, read, computed).createOrReplaceTempView(read)
    after = runtime.spark.sql(executable_view_query(definition.sql))
    before = runtime.frame(view) if kind != "new" and view in runtime.relations else None
    result = (_new_view(kind, after, samples) if before is None
              else _compared(kind, before, after, key, samples))
    computed[view] = after
    return result


def _input(runtime: PipelineRuntime, name: str, computed: dict[str, DataFrame]) -> DataFrame:
    if name in computed:
        return computed[name]
    if name in runtime.relations:
        return runtime.frame(name)
    return empty_frame(runtime.spark, runtime.table_schemas[name])


def _new_view(kind: str, after: DataFrame, samples: ViewSamples) -> ViewPreview:
    """Rows and NULLs per column of a view that does not exist yet, in one job."""
    columns = after.columns
    row = after.agg(F.count(F.lit(1)).alias("rows"), *(
        F.sum(F.when(F.col(f"`{name}`").isNull(), 1).otherwise(0)).alias(f"n{i}")
        for i, name in enumerate(columns))).first()
    assert row is not None
    shown = None
    if samples.count:  # at most `samples.count` (<= 50) rows asked to be shown, no more
        shown = {"added": samples.shown(after.select(*text_safe_columns(after, columns)).limit(
            samples.count).collect(), columns)}  # sample rows: preview.samples <= 50
    return ViewPreview(kind, rows_after=row["rows"], added=row["rows"], nulls={
        name: row[f"n{i}"] or 0 for i, name in enumerate(columns)}, samples=shown)


def _compared(kind: str, before: DataFrame, after: DataFrame, key: list[str] | None,
              samples: ViewSamples) -> ViewPreview:
    """Counts of the change from `before` to `after` (multisets)."""
    if [f.name.lower() for f in before.schema] != [f.name.lower() for f in after.schema]:
        # Other columns: no row survives as it was, so every row is removed and added.
        counts = before.count(), after.count()
        return ViewPreview(kind, rows_before=counts[0], rows_after=counts[1], added=counts[1],
                           removed=counts[0], columns_changed=True)
    columns = [f"`{name}`" for name in after.columns]
    signed = before.select(*(F.col(c).cast(f.dataType) for c, f in
                             zip(columns, after.schema, strict=True)), F.lit(-1).alias(WEIGHT)
                           ).union(after.select(*columns, F.lit(1).alias(WEIGHT)))
    per_row = signed.groupBy(*columns).agg(
        F.sum(WEIGHT).alias(NET),
        F.sum(F.when(F.col(WEIGHT) < 0, 1).otherwise(0)).alias("before"),
        F.sum(F.when(F.col(WEIGHT) > 0, 1).otherwise(0)).alias("after"))
    totals = per_row.agg(
        F.sum("before").alias("before"), F.sum("after").alias("after"),
        F.sum(F.greatest(F.col(NET), F.lit(0))).alias("added"),
        F.sum(F.greatest(-F.col(NET), F.lit(0))).alias("removed")).first()
    assert totals is not None
    result = ViewPreview(kind, rows_before=totals["before"] or 0,
                         rows_after=totals["after"] or 0, added=totals["added"] or 0,
                         removed=totals["removed"] or 0)
    differing = per_row.where(F.col(NET) != 0)
    if key and (result.added or result.removed):
        result = _changed_by_key(result, differing, after.columns, key)
    elif key:
        result = replace(result, key=tuple(key))
    if samples.count and (result.added or result.removed):
        result = replace(result, samples=_sampled(differing, after.columns, key, samples))
    return result


def _sampled(differing: DataFrame, names: list[str], key: list[str] | None,
             samples: ViewSamples) -> dict[str, Any]:
    """Up to `samples.count` rows added and removed, and with a key, changed rows as
    before and after (one small job each)."""
    columns = text_safe_columns(differing, names)
    # Each collect below is bounded by `samples.count` (<= 50): rows a person asked to see.
    shown: dict[str, list[dict[str, Any]]] = {
        side: samples.shown(differing.where(condition).select(*columns)
                            .limit(samples.count).collect(), names)  # preview.samples <= 50
        for side, condition in (("added", F.col(NET) > 0), ("removed", F.col(NET) < 0))}
    if key:
        new, old = (differing.where(condition).alias(alias) for condition, alias in
                    ((F.col(NET) > 0, "new"), (F.col(NET) < 0, "old")))
        on = reduce(lambda a, b: a & b, [F.col(f"new.`{k}`").eqNullSafe(F.col(f"old.`{k}`"))
                                          for k in key])
        pairs = new.join(old, on).select(
            *text_safe_columns(differing, names, "old."),
            *text_safe_columns(differing, names, "new.")
        ).limit(samples.count).collect()  # at most samples.count (<= 50) pairs asked for
        shown["changed"] = [{"before": samples.shown([pair[:len(names)]], names)[0],
                             "after": samples.shown([pair[len(names):]], names)[0]}
                            for pair in pairs]
    return shown


def _changed_by_key(result: ViewPreview, differing: DataFrame, names: list[str],
                    key: list[str]) -> ViewPreview:
    """`result` with its changed rows: keys both removed and added; per other column, how
    many of them hold another value after (NULL-safe). One job, over the differing rows
    only."""
    values = [name for name in names if name not in key]
    new, old = (differing.where(condition).alias(alias) for condition, alias in
                ((F.col(NET) > 0, "new"), (F.col(NET) < 0, "old")))
    on = reduce(lambda a, b: a & b, [F.col(f"new.`{k}`").eqNullSafe(F.col(f"old.`{k}`"))
                                      for k in key])
    row = new.join(old, on).agg(F.count(F.lit(1)).alias("changed"), *(
        F.sum(F.when(~F.col(f"new.`{name}`").eqNullSafe(F.col(f"old.`{name}`")), 1)
              .otherwise(0)).alias(f"v{i}") for i, name in enumerate(values))).first()
    assert row is not None
    return replace(result, key=tuple(key), changed=row["changed"], changed_values={
        name: row[f"v{i}"] or 0 for i, name in enumerate(values)})

