"""Apply a step's change (a Z-set) to a stored Delta table, in one commit.

Inserted rows only: an append, which reads nothing stored. With deleted rows:

* **delta-spark**: one Delta `MERGE` deletes the doomed rows and inserts the new
  ones. The pipeline's tables and views have deletion vectors, so a deletion
  marks rows in a small vector file instead of rewriting the data files holding
  them, and tables with the change data feed also write the deleted rows to
  `_change_data/` (how the next step reads the change). A Z-set deletes *one
  copy* of a row per deletion, while `MERGE` deletes every target row matching a
  source row: for a table that may hold equal rows, the copies that must stay
  (held minus deleted) are counted and inserted again by the same `MERGE`, which
  costs one more scan of the table. A table whose rows are `distinct` (it declares
  a PRIMARY KEY) skips the count; where rows are unique by some columns (an
  aggregate's state, by group) the deletions match on those alone.
* **delta-rs**: copy-on-write at file granularity, the way Delta's own MERGE and
  DELETE work without deletion vectors: Spark finds which data files hold a
  deleted row (only their names come back to the driver), rewrites just those
  files without one copy of each deleted row (`EXCEPT ALL` keeps multiplicities)
  together with the inserted rows, and one Delta commit removes the old files and
  adds the new ones.

Every change applies to the version the manifest pinned: if a write that no
manifest committed sits on top of it (a step that crashed), the table is
restored first, so a retried step applies each change exactly once.
"""

from __future__ import annotations

import decimal
import re
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reconciler.engine.delta.commit import CommitOf, commit_files, write_errors, write_files
from reconciler.engine.delta.log import relative_file, table_uri
from reconciler.engine.delta.parquet_stats import DATE_DAYS
from reconciler.engine.delta.storage import DeltaStorage
from reconciler.engine.delta.versions import DeltaVersion
from reconciler.engine.spark.local_rows import empty_frame
from reconciler.engine.spark.schema import conform, quoted
from reconciler.engine.spark.session import session_settings
from reconciler.support.errors import ReconcileError

FILE_COLUMN = "__file"
MERGE_OP = "__reconcile_op"
"""The source column of a `MERGE` saying whether a row is deleted or inserted."""
REWRITE_WHOLE_BYTES = 8 * 1024 * 1024
"""A table this small (a grouped view, a state table) is rewritten whole on a deletion by
the delta-rs path, which rewrites the files holding deleted rows anyway."""
OVERWRITE_SMALL_BYTES = 512 * 1024
"""On Delta's writer, a table this small without the change data feed (a grouped view, an
aggregate's state) takes a change with deletions as an overwrite of held - deleted +
inserted: 5 Spark jobs (the write, Delta's snapshot of the version written on, its file
listing) against 9 for the cheapest `MERGE` and 14 to 20 for a table's first
(`tests/engine/test_step_cost.py` measures both on a bare table). Bounded so that a step writes
what follows its change: 512 kB is within the write budget of a 1,000-row step (20x its
~30 kB of input + 200 kB), where rewriting a 6 MB view each step would grow its storage
by the view's size per step until retention. A table with the change data feed too (an
input fed by a `changes: true` connector): the rewrite removes whole files, which the
feed reads as every row deleted and inserted again, so the step reads such a table's
change from the files instead and nets it (`DeltaTables.whole_file_change`,
`step.table_change`), at most this many bytes: a `changes: true` step of 40 inserted and
8 deleted events (`tests/engine/test_step_cost.py`) ran 35 Spark jobs with the MERGE (19
of them its own, 1 a snapshot) and runs 16 with the rewrite, none a snapshot."""


class Pinned(Protocol):
    """A table at one version, as a change is applied to it (`relation.DeltaRelation`)."""

    @property
    def storage(self) -> DeltaStorage: ...
    @property
    def path(self) -> str: ...
    @property
    def version(self) -> int: ...
    @property
    def schema(self) -> T.StructType: ...


def apply_changes(target: Pinned, inserts: DataFrame | None, deletes: DataFrame | None, *,
                  app_transaction: tuple[str, int] | None = None,
                  unique_by: Sequence[str] = (), distinct: bool = False,
                  steady_source: bool = False) -> int:
    """Make `target` (a table at a version) minus `deletes` plus `inserts` its next version.

    With `app_transaction` (app id, version) the change is applied at most once, like an
    idempotent append: a table that already records it is left as it is. `unique_by`:
    columns no two rows share (an aggregate's state, by group), so a deleted row is
    found by them alone (an anti-join with the few deleted keys, no shuffle of the
    table as a multiset difference needs). `distinct`: no two rows are equal (a declared
    PRIMARY KEY, trusted as Spark and Delta trust theirs), so a deletion removes the one
    equal row and no copies are counted. `steady_source`: the change is a step's own
    (pinned reads and checkpoints through deterministic built-ins only, `desired.parsing.safety`),
    which reads the same rows however often it is read, so Delta's MERGE need not
    materialize it first (4 to 6 jobs); not a streaming batch's rows, which Spark caches
    while the MERGE runs."""
    storage, version, schema = target.storage, target.version, target.schema
    uri = table_uri(target.path)
    if inserts is None:
        inserts = empty_frame(storage.spark, schema)
    latest = storage.at(uri)  # opened once: its version, transactions, files and sizes
    if latest.version != version:
        storage.restore(uri, version)
        latest = storage.at(uri)
    if deletes is None:  # an append, which asks the table for its transactions itself
        app_id, txn_version = app_transaction or (None, None)
        return storage.append(uri, inserts, app_id=app_id, txn_version=txn_version)
    if app_transaction is not None:
        done = latest.recorded_transaction(app_transaction[0])
        if done is not None and done >= app_transaction[1]:
            return version
    if storage.writer.marks_rows:
        stored = latest.data_bytes()  # from the log; None where only Delta's reader reads
        if stored is not None and stored <= OVERWRITE_SMALL_BYTES:
            rows = _without(storage.read_version(latest, schema), deletes, unique_by)
            return storage.replace_small(latest, rows.unionByName(inserts), schema,
                                         app_transaction)
        return _merge(target, latest, inserts, deletes, app_transaction,
                      unique_by if unique_by or distinct else None, steady_source)
    if latest.deletion_vectors:  # its files hold rows its deletion vectors removed
        raise ReconcileError(f"{uri}: Delta's Spark writer keeps this table with deletion "
                             "vectors; the delta-rs writer cannot change its rows "
                             "(RECONCILE_DELTA_WRITER=delta-spark)")
    actions = latest.add_actions()
    sizes = dict(zip(actions.column("path").to_pylist(),
                     actions.column("size_bytes").to_pylist(), strict=True))
    if sum(sizes.values()) <= REWRITE_WHOLE_BYTES:  # one job fewer than finding the files
        replaced: list[tuple[str, int | None]] = list(sizes.items())
    else:
        files = _files_holding(storage.scan(latest.files, schema), deletes, schema)
        replaced = [(relative, sizes.get(relative)) for relative in
                    (relative_file(uri, file) for file in files)]
    unknown = [relative for relative, size in replaced if size is None]
    if unknown:  # never drop a deletion silently: the table must be as the log says
        raise ReconcileError(f"{uri}: data file {unknown[0]} holds a deleted row but is not in "
                             f"version {version}'s log")
    # Every file's size, none being unknown (checked above): the commit removes them.
    known = [(relative, size) for relative, size in replaced if size is not None]
    root = uri.rstrip("/")
    rewritten = storage.scan([f"{root}/{relative}" for relative, _ in replaced], schema)
    rows = _without(rewritten, deletes, unique_by).union(inserts) if replaced else inserts
    written = write_files(storage.spark, conform(rows, schema, where=uri), uri, schema)
    tag, before = uuid.uuid4().hex, latest.version
    commit_files(uri, written, schema, CommitOf(tag, replaces=known, changes_rows=True,
                                                app_transaction=app_transaction),
                 table=latest.table, storage_options=storage.storage_options(uri))
    return storage.rs_commit_version(uri, tag, before)


def _merge(target: Pinned, latest: DeltaVersion, inserts: DataFrame, deletes: DataFrame,
           app_transaction: tuple[str, int] | None, unique_by: Sequence[str] | None,
           steady_source: bool) -> int:
    """One Delta `MERGE` into the table's `latest` version (the pinned version's rows):
    deletions (one copy each) and insertions, in one commit that records `app_transaction`
    and is tagged so its version is found (`rs_commit_version`). `unique_by`: the columns
    no two rows share (empty: every column), None when equal rows may be held several
    times."""
    storage, schema, uri = target.storage, target.schema, latest.uri
    names = [field.name for field in schema.fields]
    keys = list(unique_by or ()) or names
    doomed = deletes.select(*keys).distinct()
    bounds = _key_bounds(deletes, schema.fields[names.index(keys[0])])
    if unique_by is None:  # equal rows held several times: keep those that stay
        held = storage.read_version(latest, schema)
        if bounds:
            held = held.filter(F.expr(_within(quoted(keys[0]), bounds)))
        inserts = inserts.unionByName(_surviving_copies(held, deletes, names))
    source = doomed.select(*(F.col(name) if name in keys else
                             F.lit(None).cast(field.dataType).alias(name)
                             for name, field in zip(names, schema.fields, strict=True)),
                           F.lit("delete").alias(MERGE_OP)).unionByName(
        inserts.select(*names, F.lit("insert").alias(MERGE_OP)))
    # The source's own session: inside a streaming batch (`foreachBatch`) that is the
    # batch's session, where its temporary view and the statement must both live.
    session = source.sparkSession
    view = f"__reconcile_merge_{uuid.uuid4().hex}"
    source.createOrReplaceTempView(view)
    matched = " AND ".join(f"t.{quoted(name)} <=> s.{quoted(name)}" for name in keys)
    if bounds:  # on the target alone: Delta skips the files outside it by their statistics
        matched = f"{_within(f't.{quoted(keys[0])}', bounds)} AND {matched}"
    statement = (
        f"MERGE INTO delta.{quoted(uri)} AS t USING {view} AS s "
        f"ON s.{MERGE_OP} = 'delete' AND {matched} WHEN MATCHED THEN DELETE "
        f"WHEN NOT MATCHED AND s.{MERGE_OP} = 'insert' THEN INSERT "
        f"({', '.join(quoted(name) for name in names)}) "
        f"VALUES ({', '.join(f's.{quoted(name)}' for name in names)})")
    tag, before = uuid.uuid4().hex, latest.version
    settings = {"spark.databricks.delta.commitInfo.userMetadata": tag}
    if steady_source:  # for this statement only, never the user's session
        settings["spark.databricks.delta.merge.materializeSource"] = "none"
    if app_transaction is not None:  # Delta's idempotent DML: skipped if already recorded
        settings |= {"spark.databricks.delta.write.txnAppId": app_transaction[0],
                     "spark.databricks.delta.write.txnVersion": str(app_transaction[1])}
    try:
        with session_settings(session, settings), write_errors(uri):
            session.sql(statement)
    finally:
        session.catalog.dropTempView(view)
    return storage.rs_commit_version(uri, tag, before)


_RANGE_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.DecimalType, T.DateType)
"""Key types whose bounds are written into the MERGE as literals that cannot be anything but
a number or a date."""


def _key_bounds(deletes: DataFrame, key: T.StructField) -> tuple[str | None, str | None] | None:
    """The deleted rows' lowest and highest `key`, as SQL literals; None when the key's type
    is not one of `_RANGE_TYPES` or no deleted row has one. A MERGE's `ON` compares target
    and source columns, which no file statistic can answer: a range on the target alone
    (`_within`) lets Delta read only the files that may hold a deleted row (files hold
    ranges of the first column when rows arrive in its order, as ids do, or after
    `OPTIMIZE`). One small aggregate of the deleted rows.

    A date bound outside 0001-01-01..9999-12-31 (`parquet_stats.DATE_DAYS`: Spark reads
    year 0, -0044 or +12345) is left out, that side of the range open: no statistic the
    engine writes holds such a date, and Spark's own filter on a date literal near its first
    day fails (`integer overflow`, rebasing it to the Julian calendar), which would stop
    every retry of the step (issue 78)."""
    if not isinstance(key.dataType, _RANGE_TYPES):
        return None
    low, high = F.min(quoted(key.name)), F.max(quoted(key.name))
    if not isinstance(key.dataType, T.DateType):
        bounds = deletes.agg(low, high).first()
        if bounds is None or bounds[0] is None:  # (two scalars, never rows of the table)
            return None
        return _literal(bounds[0]), _literal(bounds[1])
    # As Spark writes them, and as days: no Python `date` holds year 0 or +12345.
    dates = deletes.agg(low.cast("string"), high.cast("string"), F.unix_date(low),
                        F.unix_date(high)).first()
    if dates is None or dates[0] is None:
        return None
    first, last = DATE_DAYS
    opened = (_literal(dates[0]) if first <= dates[2] <= last else None,
              _literal(dates[1]) if first <= dates[3] <= last else None)
    return None if opened == (None, None) else opened


def _within(column: str, bounds: tuple[str | None, str | None]) -> str:
    """`column` in the range (a side None: open), or NULL (min and max skip NULLs; a NULL
    key can be deleted)."""
    low, high = bounds
    ranged = (f"{column} BETWEEN {low} AND {high}" if low is not None and high is not None
              else f"{column} >= {low}" if low is not None else f"{column} <= {high}")
    return f"({ranged} OR {column} IS NULL)"


_DATE_TEXT = re.compile(r"[+-]?[0-9]{4,7}-[0-9]{2}-[0-9]{2}")
"""A date as Spark casts one to a string: `2024-01-31`, `0000-01-01`, `+12345-01-01`."""


def _literal(value: Any) -> str:
    """A bound as SQL: numbers as written, dates (as Spark writes them, `_key_bounds`) as
    DATE literals (nothing else reaches it)."""
    if isinstance(value, str) and _DATE_TEXT.fullmatch(value):
        return f"DATE'{value}'"
    if isinstance(value, decimal.Decimal):  # positional, as written in a column: 0.0000000000
        return f"{format(value, 'f')}BD"
    if isinstance(value, int):
        return str(value)
    raise TypeError(f"no SQL literal for {type(value).__name__}")


def _surviving_copies(held: DataFrame, deletes: DataFrame, names: list[str]) -> DataFrame:
    """For each deleted row the table holds more often than it is deleted, the copies that
    stay (held - deleted of them): `MERGE` deletes them all, so they are inserted again.
    The table is only scanned for rows equal to a deleted one (a semi-join with the few)."""
    deleted = deletes.groupBy(*names).agg(F.count(F.lit(1)).alias("__deleted"))
    renamed = deleted.toDF(*(f"__d{i}" for i in range(len(names))), "__deleted")
    pairs = [(F.col(name), renamed[f"__d{i}"]) for i, name in enumerate(names)]
    counted = (held.join(renamed.drop("__deleted"), null_safe_equal(pairs), "left_semi")
               .groupBy(*names).agg(F.count(F.lit(1)).alias("__held")))
    pairs = [(counted[name], renamed[f"__d{i}"]) for i, name in enumerate(names)]
    stay = (counted.join(renamed, null_safe_equal(pairs), "inner")
            .select(*names, (F.col("__held") - F.col("__deleted")).alias("__stay"))
            .filter(F.col("__stay") > 0))
    return stay.select(*names, F.explode(F.sequence(F.lit(1), F.col("__stay"))).alias("__n")
                       ).select(*names)


def _without(rows: DataFrame, deletes: DataFrame, unique_by: Sequence[str]) -> DataFrame:
    """`rows` less one copy of each deleted row (by `unique_by` when rows are unique so)."""
    if not unique_by:
        return rows.exceptAll(deletes)
    doomed = deletes.select(*(F.col(name).alias(f"__d{i}") for i, name in enumerate(unique_by)))
    return rows.join(doomed, null_safe_equal([(rows[name], doomed[f"__d{i}"])
                                              for i, name in enumerate(unique_by)]), "left_anti")


def _files_holding(stored: DataFrame, deletes: DataFrame, schema: T.StructType) -> list[str]:
    """Names of the data files with a row equal (NULLs equal too) to a deleted row."""
    located = stored.select("*", F.col("_metadata.file_path").alias(FILE_COLUMN))
    # Renamed: `deletes` may come from the same scan, and Spark would then see one column.
    wanted = deletes.toDF(*(f"__d{i}" for i in range(len(schema.fields)))).distinct()
    condition = null_safe_equal([(located[field.name], wanted[f"__d{i}"])
                                 for i, field in enumerate(schema.fields)])
    matched = located.join(wanted, condition, "left_semi").select(FILE_COLUMN).distinct()
    # Distinct file paths, at most one per data file of the version the log lists (never
    # the table's rows): the commit must name them to remove them.
    return [row[0] for row in matched.collect()]  # small by construction: file paths


def null_safe_equal(pairs: list[tuple[Column, Column]]) -> Column:
    """All pairs equal, NULL equal to NULL (how SQL's GROUP BY and EXCEPT see rows)."""
    condition = None
    for left, right in pairs:
        equal = left.eqNullSafe(right)
        condition = equal if condition is None else condition & equal
    assert condition is not None, "no columns to compare"
    return condition

