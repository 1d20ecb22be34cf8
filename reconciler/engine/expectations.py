"""Expectations checked on each step's change: counted, dropped, or failing the step.

A relation's expectations (`desired.parsing.expectation_clauses`) are checked on the rows a step
adds to it, never by rescanning it: a table's inserted rows (ingested or
`execute`d), a view's inserted rows (its change's insert side). All of a
relation's counts come from one aggregate job over those rows, and a step with no
change runs none (a relation without a change is not looked at).

- keep (no action): the violating rows stay; they are counted.
- DROP ROW: a view's query is filtered (`desired.parsing.expectation_clauses.with_drops`,
  folded into the query every refresh runs, so maintenance keeps it like a WHERE clause); the
  count is of the rows the unfiltered query's change would have added (a view
  recomputed each step: of its whole recomputed result). A table's violating
  inserted rows are deleted again before the step commits, so no committed version
  holds them.
- FAIL UPDATE: the step raises before the manifest is written, naming the
  expectation, the relation and a few violating rows (their keys): the committed
  state stays in force. The rows' values are in the error's private detail only
  (`errors.QuotesData`): manifests, pull requests and outputs get its public form.
  Writes the step made stay uncommitted (as after a crash); the rows ingested stay in
  the table's uncommitted versions, so the next step meets them again until the
  expectation or the rows change (`reconcile execute "DELETE FROM t WHERE ..."`
  removes them).

Counts go to the step's `last_step.expectations` (so every history entry keeps its
step's) and, summed since the relation was created or recomputed, to its state
entry in the manifest (`relations.<name>.expectations`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import sqlglot
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from sqlglot import exp

from reconciler.desired.analysis.keyed import from_of
from reconciler.desired.analysis.shapes import Derived, Shape
from reconciler.desired.parsing.expectation_clauses import (
    DROP_ALIAS,
    Expectation,
    executable_view_query,
    violated,
)
from reconciler.engine.maintenance.change import change_of
from reconciler.engine.maintenance.frames import StepFrames
from reconciler.engine.maintenance.zset import ZSet
from reconciler.engine.runtime import PipelineRuntime
from reconciler.engine.spark.query_rows import AS_PYTHON_READS, text_safe_columns
from reconciler.support.errors import RepeatsEachStep

SAMPLE = 5
"""Violating rows a FAIL UPDATE error shows."""


def expectations_of(runtime: PipelineRuntime, relation: str) -> tuple[Expectation, ...]:
    return runtime.program.relation(relation).expectations


def check_table(runtime: PipelineRuntime, table: str, change: ZSet,
                recompute: Callable[[], ZSet]) -> ZSet:
    """Check a table's inserted rows; returns its change, without the rows a DROP ROW
    expectation deleted (`recompute()` reads the change again after that delete)."""
    expectations = expectations_of(runtime, table)
    if not expectations or change.inserts is None:
        return change
    counts = _count(change.inserts, expectations)
    _record(runtime, table, counts)
    _fail(runtime, "table", table, change.inserts, expectations, counts)
    drops = [e.condition for e in expectations
             if e.action == "drop" and counts[e.name]["violations"]]
    if not drops:
        return change
    rejected = change.inserts.filter(" OR ".join(violated(c) for c in drops))
    # One stored copy of each rejected insert deleted, before the step commits, so that no
    # committed version holds them; the table pinned at the version that makes
    runtime.pin(table, runtime.relation(table).apply_changes(
        None, rejected.localCheckpoint(eager=True),
        distinct=bool(runtime.program.tables[table].primary_key)))
    return recompute()


def check_view(runtime: PipelineRuntime, frames: StepFrames, view: str, change: ZSet, *,
               shape: Shape | None = None, totals: dict[str, Any] | None = None) -> None:
    """Count (or fail on) a refreshed view's inserted rows, and count what its DROP ROW
    expectations held back. `shape`: the shape the step maintained the view by (None: it
    was computed whole, by a recompute or a bootstrap). `totals`: the running totals
    before the refresh (a recompute writes a new state entry, without them)."""
    expectations = expectations_of(runtime, view)
    if not expectations:
        return
    kept = [e for e in expectations if e.action != "drop"]
    counts = _count(change.inserts, kept) if kept and change.inserts is not None else {
        e.name: {"action": e.action, "rows": 0, "violations": 0} for e in kept}
    drops = [e for e in expectations if e.action == "drop"]
    if drops:
        unfiltered = _unfiltered_inserts(runtime, frames, view, shape)
        counts.update(_count(unfiltered, drops) if unfiltered is not None else {
            e.name: {"action": "drop", "rows": 0, "violations": 0} for e in drops})
    _record(runtime, view, counts, totals)
    if change.inserts is not None:
        _fail(runtime, "view", view, change.inserts, kept, counts)


def _unfiltered_inserts(runtime: PipelineRuntime, frames: StepFrames, view: str,
                        shape: Shape | None) -> DataFrame | None:
    """The rows the view's query, before its DROP ROW filter, adds this step: its inner
    change when maintained (the filter makes it a select over a derived table), else
    its whole result (a recomputed view is computed whole anyway)."""
    if isinstance(shape, Derived) and getattr(from_of(shape.select), "alias_or_name",
                                              None) == DROP_ALIAS:
        return change_of(frames, shape.inner).net().inserts
    sql = executable_view_query(runtime.program.views[view].sql)
    # The view has DROP ROW expectations (the caller's `drops`), so its query runs as
    # `SELECT * FROM (<query>) AS __expectations WHERE ...` (`with_drops`): a select with a FROM.
    query = sqlglot.parse_one(sql, dialect="spark")
    assert isinstance(query, exp.Select)
    inner = from_of(query)
    assert inner is not None
    for read in runtime.program.views[view].reads:
        runtime.frame(read).createOrReplaceTempView(read)
    return runtime.spark.sql(inner.this.sql(dialect="spark"))


def _count(rows: DataFrame, expectations: Sequence[Expectation]) -> dict[str, dict[str, Any]]:
    """Rows checked and each expectation's violations, in one aggregate job."""
    sums = [F.sum(F.when(F.expr(violated(e.condition)), 1).otherwise(0)).alias(f"v{i}")
            for i, e in enumerate(expectations)]
    [result] = rows.agg(
        F.count(F.lit(1)).alias("rows"), *sums).collect()  # small: one row of counts
    return {e.name: {"action": e.action, "rows": int(result["rows"]),
                        "violations": int(result[f"v{i}"] or 0)}
            for i, e in enumerate(expectations)}


def _record(runtime: PipelineRuntime, relation: str, counts: dict[str, dict[str, Any]],
            before: dict[str, Any] | None = None) -> None:
    """This step's counts, and the relation's running totals in its state entry (added to
    `before`, else to those the entry holds)."""
    runtime.expectation_counts[relation] = counts
    record = runtime.relations[relation]
    totals = dict(before if before is not None else record.expectations or {})
    for name, count in counts.items():
        before = totals.get(name) or {"rows": 0, "violations": 0}
        totals[name] = {"action": count["action"], "rows": before["rows"] + count["rows"],
                        "violations": before["violations"] + count["violations"]}
    runtime.relations[relation] = replace(record, expectations=totals)


def _fail(runtime: PipelineRuntime, kind: str, relation: str, rows: DataFrame,
          expectations: Sequence[Expectation], counts: dict[str, dict[str, Any]]) -> None:
    for expectation in expectations:
        count = counts[expectation.name]
        if expectation.action != "fail" or not count["violations"]:
            continue
        keys = _key_columns(runtime, kind, relation, expectation.condition, rows.columns)
        types = {field.name.lower(): field.dataType for field in rows.schema.fields}
        # Bounded: SAMPLE rows of the key columns, for the error message; a value Python
        # may not hold (a date of year +12345, a timestamp) comes back as Spark's text.
        sample = rows.filter(violated(expectation.condition)).select(
            *text_safe_columns(rows, keys)).limit(
            SAMPLE).collect()  # at most SAMPLE key values, for the message
        raise expectation_failed(kind, relation, expectation, count, [
            ", ".join(f"{key}={_shown(value, isinstance(types[key.lower()], AS_PYTHON_READS))}"
                      for key, value in zip(keys, row, strict=True)) for row in sample])


SHOWN_CHARACTERS = 80
"""A value a FAIL UPDATE message shows is cut to this many characters."""


def _shown(value: Any, as_read: bool) -> str:
    """A key value in a FAIL UPDATE message: one line, at most `SHOWN_CHARACTERS` long."""
    text = repr(value) if as_read or value is None or not str(value).isprintable() \
        else str(value)
    return text if len(text) <= SHOWN_CHARACTERS else f"{text[:SHOWN_CHARACTERS - 3]}..."


def expectation_failed(kind: str, relation: str, expectation: Expectation,
                       count: dict[str, Any], sample: list[str]) -> RepeatsEachStep:
    """The error a FAIL UPDATE expectation raises. Its public form (for pull requests,
    outputs, manifests) names the relation, the expectation and the counts; the violating
    rows' values are in its detail only, for the terminal of whoever ran the command."""
    name, condition = expectation.name, expectation.condition
    counts = f"failed on {count['violations']} of {count['rows']} new row(s)"
    stopped = "the step stopped and nothing was committed"
    return RepeatsEachStep(
        f"{kind} '{relation}': expectation '{name}' (ON VIOLATION FAIL UPDATE) {counts}; "
        f"{stopped}",
        f"{kind} '{relation}': expectation '{name}' (EXPECT ({condition}) ON VIOLATION FAIL "
        f"UPDATE) {counts}, e.g. {'; '.join(sample)}; {stopped}",
        until=f"the rows violating '{name}' are deleted (`reconcile execute \"DELETE FROM "
              f"...\"`), or the expectation is changed and applied")


def _key_columns(runtime: PipelineRuntime, kind: str, relation: str, condition: str,
                 columns: list[str]) -> list[str]:
    """What names a violating row: a table's primary key, else its first column and the
    columns the condition reads."""
    key = list(runtime.program.tables[relation].primary_key) if kind == "table" else []
    if key:
        return key
    read = {column.name.lower()
            for column in sqlglot.parse_one(condition, dialect="spark").find_all(exp.Column)}
    return [column for index, column in enumerate(columns)
            if index == 0 or column.lower() in read]
