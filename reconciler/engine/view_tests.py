"""Running a view test (`desired/view_test_files.py`) on Spark, with no state and no backend.

1. **Computed:** the relations the view reads, up its lineage, are temporary views of
   the test's rows (a table not given is empty; an upstream view not given is its query
   over them), and the view's query runs over them; its rows must be `expect`.
2. With a `change`, **recomputed:** the same after the change (the given rows less one
   copy of each deleted row, plus the inserted ones) must be `expect_after`; and
   **maintained:** the view's part of the pipeline is deployed into a scratch folder
   (real Delta tables, the real bootstrap and step): the given rows are written into
   its tables (by delta-rs, straight from the test's rows: no Spark job), the view is
   bootstrapped over them, the change is a step, and the view as the step leaves it
   must be `expect_after`. A rule of incremental maintenance that is wrong for the
   engineer's data fails here.

Rows compare as multisets on the columns `expect` names; doubles to 9 decimals. The
rows reaching the driver are the test's own and the differing ones (fixture-sized).
"""

from __future__ import annotations

import datetime as dt
import tempfile
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from deltalake import write_deltalake
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reconciler.desired.parsing.expectation_clauses import executable_view_query
from reconciler.desired.view_test_files import Row, ViewTest
from reconciler.engine.bootstrap.recompute import bootstrap
from reconciler.engine.delta.log import table_uri
from reconciler.engine.delta.merge import apply_changes
from reconciler.engine.delta.relation import DeltaRelation
from reconciler.engine.delta.storage import DeltaStorage
from reconciler.engine.runtime import PipelineRuntime, table_schema
from reconciler.engine.spark.local_rows import arrow_rows, local_frame
from reconciler.engine.spark.session import with_safe_sql_conf
from reconciler.engine.step import run_step
from reconciler.plan.diff import diff_programs
from reconciler.state.layout import Layout
from reconciler.state.program import CommittedProgram
from reconciler.support.errors import ReconcileError

SHOWN_ROWS = 20
WEIGHT = "__test_weight"


@dataclass(frozen=True)
class TestOutcome:
    """A test's result: `failure` names the check that failed (computed, recomputed after
    the change, maintained) and `diff` holds its lines; both empty when it passed."""

    name: str
    failure: str = ""
    diff: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return not self.failure


FIXTURE_CONF = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false",
                "spark.sql.codegen.wholeStage": "false",
                "spark.sql.codegen.factoryMode": "NO_CODEGEN"}
"""Fixture rows are a handful: one task per stage instead of Spark's 200, and no adaptive
planning, which runs each shuffle's map stage as a job of its own (a test runs half the
jobs without it: 19 instead of 40 for the grades example's test with a change). And no
generated code: compiling it costs more than interpreting a few rows (Janino's compiler
took 30% of the JVM's samples in a warm run). Spark falls back to the same interpreted
path when code does not compile. The orders example's test, first run in fresh sessions,
four each way: 7.0-9.1 s interpreted against 8.9-11.3 s compiled; `factoryMode` alone
(three each way) was about a second of that."""

CHECKS_AT_ONCE = 3
"""Checks run side by side, each in a session of its own on the one JVM. A fixture-sized
check keeps the driver busy, not the cores: its time goes to planning queries and
committing writes, one round trip after another, so two checks at once take little longer
than one (`make bench-view-tests`). Three: a test with a change has three checks."""

TIME_ZONE = "spark.sql.session.timeZone"


@dataclass(eq=False)  # each check is its own: hashed by identity
class _Check:
    """One check of a test: run in a session, it gives the diff lines (none: it holds)."""

    what: str  # the outcome's `failure` when it fails
    run: Callable[[SparkSession], tuple[str, ...]]
    longest: bool = False  # the maintained check (a bootstrap, then a step): queued first


def run_view_tests(spark: SparkSession, cases: Iterable[tuple[dict[str, Any], ViewTest]]
                   ) -> Iterator[TestOutcome]:
    """Each test's outcome, in the order given, as soon as it is known. Every check of every
    test (computed; with a change, recomputed and maintained) is submitted at once to
    `CHECKS_AT_ONCE` workers; a test's outcome is its first failing check, in that order."""
    planned = [(test, _checks(document, test)) for document, test in cases]
    # A new session starts from the JVM's conf, not from `spark`'s changes since: the time
    # zone is carried, as dates and timestamps are read in it
    settings = {TIME_ZONE: str(spark.conf.get(TIME_ZONE))} | FIXTURE_CONF
    every = sorted((check for _, checks in planned for check in checks),
                   key=lambda check: not check.longest)
    pool = ThreadPoolExecutor(max_workers=CHECKS_AT_ONCE, thread_name_prefix="view-test")
    try:
        futures = {check: pool.submit(_in_own_session, spark, settings, check.run)
                   for check in every}
        for test, checks in planned:
            diffs = ((check.what, futures[check].result()) for check in checks)
            failed = next(((what, diff) for what, diff in diffs if diff), None)
            yield TestOutcome(test.name) if failed is None else TestOutcome(test.name, *failed)
    finally:  # an error stops what has not started; what runs ends before this returns
        pool.shutdown(wait=True, cancel_futures=True)


def _in_own_session(spark: SparkSession, settings: dict[str, str],
                    run: Callable[[SparkSession], tuple[str, ...]]) -> tuple[str, ...]:
    """`run` in a new session of `spark`'s JVM, with `settings`: its temporary views and
    `FIXTURE_CONF` are its own, so checks side by side cannot see each other's."""
    session = with_safe_sql_conf(spark.newSession())
    for key, value in settings.items():
        session.conf.set(key, value)
    return run(session)


def _checks(document: dict[str, Any], test: ViewTest) -> list[_Check]:
    """What a test checks, in the order its outcome reports the first failure: the view
    computed from the given rows; with a change, recomputed and maintained after it."""
    program = lineage_of(document, test.view)
    typed = CommittedProgram.of(program)
    computed = _Check("computed from the given rows", lambda spark: _difference(
        _computed(spark, typed, test.view, test.given), test.expect))
    if test.expect_after is None:
        return [computed]
    given_views = sorted(set(test.given) & set(typed.views))
    if given_views:
        raise ReconcileError(f"test '{test.name}' gives rows of view(s) "
                             f"{', '.join(given_views)}: a test with a change gives tables "
                             "only, as a step changes tables", file=test.file, line=test.line)
    changed = {name: _changed(rows, test.inserts.get(name, []), test.deletes.get(name, []))
               for name, rows in {**{n: [] for n in test.inserts}, **test.given}.items()}
    expect_after = test.expect_after
    return [computed,
            _Check("recomputed after the change", lambda spark: _difference(
                _computed(spark, typed, test.view, changed), expect_after)),
            _Check("maintained through the change (the recomputed view is right: an "
                   "incremental rule is wrong here)", lambda spark: _difference(
                       _maintained(spark, program, test), expect_after), longest=True)]


def lineage_of(document: dict[str, Any], view: str) -> dict[str, Any]:
    """The program cut down to `view` and what it reads, transitively, without connectors."""
    needed: set[str] = set()
    pending = [view]
    while pending:
        name = pending.pop()
        if name not in needed:
            needed.add(name)
            pending.extend(document["views"].get(name, {}).get("reads", []))
    return {**document, "connectors": {},
            "tables": {k: v for k, v in document["tables"].items() if k in needed},
            "views": {k: v for k, v in document["views"].items() if k in needed},
            "order": [name for name in document["order"] if name in needed]}


def _computed(spark: SparkSession, program: CommittedProgram, view: str,
              given: dict[str, list[Row]]) -> DataFrame:
    """`view` over temporary views of the given rows, computing upstream views in order."""
    frames: dict[str, DataFrame] = {}
    for name in program.order:
        if name in program.tables:
            frames[name] = rows_frame(spark, given.get(name, []),
                                      table_schema(program.tables[name]))
            continue
        for read in program.views[name].reads:
            frames[read].createOrReplaceTempView(read)
        computed = spark.sql(executable_view_query(program.views[name].sql))
        frames[name] = (rows_frame(spark, given[name], computed.schema) if name in given
                        else computed)
    return frames[view]


def _maintained(spark: SparkSession, program: dict[str, Any], test: ViewTest) -> DataFrame:
    """The view bootstrapped over the given rows, then after a step of the change, in a
    scratch pipeline of real Delta tables (removed when the process exits)."""
    scratch = Path(tempfile.mkdtemp(prefix="reconcile-test-"))
    # What is tested is the incremental rule: `refresh: auto` (the default) would recompute
    # rows this few, so here it maintains whatever can be maintained.
    program = {**program, "views": {
        name: {**view, "refresh": "incremental"} if view.get("refresh") == "auto" else view
        for name, view in program["views"].items()}}
    # delta-rs commits fixture-sized writes from here, without a Spark job each: the
    # maintenance rules under test are the same with either writer.
    runtime = PipelineRuntime(spark, DeltaStorage(spark, writer="delta-rs"),
                              Layout(str(scratch / "storage"), "test"),
                              CommittedProgram.of(program), {},
                              project_dir=scratch)
    tables_only = {**program, "views": {}, "order": list(program["tables"])}
    bootstrap(runtime, diff_programs(None, tables_only), {}, serial=1, silent=True)
    for name, rows in test.given.items():  # fixture rows: written by delta-rs, no Spark job
        path = table_uri(runtime.relations[name].path)
        schema = runtime.table_schemas[name]
        write_deltalake(path, arrow_rows(_values(rows, schema), schema), mode="append")
        runtime.pin(name, runtime.relation(name).latest())
    started = bootstrap(runtime, diff_programs(tables_only, program), {}, serial=2,
                        silent=True)
    for name in sorted({*test.inserts, *test.deletes}):
        record, schema = runtime.relations[name], runtime.table_schemas[name]
        latest = runtime.storage.latest_version(record.path)
        assert latest is not None  # the first bootstrap above created every table
        deletes = test.deletes.get(name, [])
        apply_changes(DeltaRelation(runtime.storage, record.path, latest, schema),
                      rows_frame(spark, test.inserts.get(name, []), schema),
                      rows_frame(spark, deletes, schema) if deletes else None)
    run_step(runtime, started.connectors, serial=3, ingest_inputs=False)
    return runtime.frame(test.view)


def _changed(rows: list[Row], inserts: list[Row], deletes: list[Row]) -> list[Row]:
    remaining = list(rows)
    for row in deletes:
        if row in remaining:
            remaining.remove(row)
    return remaining + list(inserts)


def rows_frame(spark: SparkSession, rows: list[Row], schema: T.StructType) -> DataFrame:
    """A test's rows as a DataFrame of `schema` (names case-insensitive; missing: NULL)."""
    fields = {field.name.lower(): field for field in schema}
    for row in rows:
        unknown = [name for name in row if name.lower() not in fields]
        if unknown:
            raise ReconcileError(f"unknown column(s) {', '.join(unknown)}; the columns are "
                                 f"{', '.join(schema.names)}")
    return local_frame(spark, _values(rows, schema), schema)


def _values(rows: list[Row], schema: T.StructType) -> list[tuple[Any, ...]]:
    """Each row's values in `schema`'s column order, as Spark's Python types."""
    return [tuple(_value(next((v for k, v in row.items() if k.lower() == field.name.lower()),
                              None), field.dataType) for field in schema) for row in rows]


def _value(value: Any, data_type: T.DataType) -> Any:
    """A YAML value as Spark's Python type for `data_type` (dates from ISO text, ...)."""
    if value is None:
        return None
    if isinstance(data_type, T.DecimalType):
        return Decimal(str(value))
    if isinstance(data_type, T.DateType) and isinstance(value, str):
        return dt.date.fromisoformat(value)
    if isinstance(data_type, T.TimestampType) and isinstance(value, str):
        return dt.datetime.fromisoformat(value)
    if isinstance(data_type, (T.IntegerType, T.LongType, T.ShortType, T.ByteType)):
        return int(value)
    if isinstance(data_type, (T.DoubleType, T.FloatType)):
        return float(value)
    if isinstance(data_type, T.StringType):
        return str(value)
    return value


def _difference(actual: DataFrame, expected: list[Row]) -> tuple[str, ...]:
    """Lines of a diff between the view's rows and the expected ones, on the columns the
    expected rows name (empty when they agree as multisets)."""
    names = list(dict.fromkeys(name for row in expected for name in row)) or actual.columns
    by_name = {field.name.lower(): field for field in actual.schema}
    missing = [name for name in names if name.lower() not in by_name]
    if missing:
        return (f"expected column(s) {', '.join(missing)} not in the view's "
                f"({', '.join(actual.columns)})",)
    chosen = T.StructType([by_name[name.lower()] for name in names])
    columns = [F.col(f"`{field.name}`") for field in chosen]
    wanted = _comparable(rows_frame(actual.sparkSession, expected, chosen))
    got = _comparable(actual.select(*columns))
    # One job: each distinct row with (actual copies - expected copies), kept when not 0;
    # at most SHOWN_ROWS differing rows of a fixture-sized view reach the driver.
    differing = wanted.withColumn(WEIGHT, F.lit(-1)).union(got.withColumn(WEIGHT, F.lit(1))
        ).groupBy(*columns).agg(F.sum(WEIGHT).alias(WEIGHT)).where(F.col(WEIGHT) != 0
        ).limit(SHOWN_ROWS).collect()  # <= SHOWN_ROWS differing rows, for the diff
    return tuple(f"  {'+ extra  ' if row[WEIGHT] > 0 else '- missing'}  "
                 f"{_shown(row, chosen.names)}" + (f" (x{abs(row[WEIGHT])})"
                                                   if abs(row[WEIGHT]) > 1 else "")
                 for row in sorted(differing, key=lambda r: r[WEIGHT]))


def _comparable(frame: DataFrame) -> DataFrame:
    return frame.select(*(F.round(F.col(f"`{f.name}`"), 9).alias(f.name)
                          if isinstance(f.dataType, (T.DoubleType, T.FloatType))
                          else F.col(f"`{f.name}`") for f in frame.schema))


def _shown(row: Any, names: list[str]) -> str:
    return "{" + ", ".join(f"{name}: {'NULL' if row[name] is None else row[name]}"
                           for name in names) + "}"
