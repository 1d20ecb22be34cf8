"""Delta tables for pipeline state: one interface, two writers.

Every table and every view of a pipeline is a Delta table, and the checkpoint
manifest pins each one to a Delta *version*. ``DeltaStorage`` is the only code
that writes or reads them, and it returns the version each write produced so
the caller can put it in the manifest.

Two writers, chosen once at construction (``chosen_writer``):

* **delta-spark** when the session has Delta's SQL extension (an embedded session
  after `make jars`, a cluster with Delta): Spark writes ``format("delta")``
  itself, with Delta's own app transactions for idempotent appends. This is the
  writer users run.
* **delta-rs** (``deltalake``) otherwise (a cluster without Delta's jars), or when
  ``RECONCILE_DELTA_WRITER=delta-rs`` asks for it: Spark's executors write the
  Parquet files and delta-rs commits them in one transaction
  (``engine/delta/commit.py``); no rows pass through the driver.

Whoever wrote a table, its versions, schema, row counts and each version's data
files are read from the log by delta-rs (no JVM, no Spark job), and a pinned read
is Spark scanning that version's files with the declared schema, lazily and in
parallel: that shared part, which the writers use too, is ``DeltaTables``
(``engine/delta/tables.py``), which ``DeltaStorage`` extends with the writes. Both
writers produce ordinary Delta tables that either writer, and any other Delta
reader, can open.

Each committing write tags its commit (``reconciler.commit`` in delta-rs commit
info, ``userMetadata`` in delta-spark) and looks that tag up in the history, so
the version returned is the version of *this* write even if something else
committed right after it. Locating tables and reading their logs is ``delta_log``'s job.
"""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Mapping
from typing import NamedTuple, cast

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reconciler.engine.delta.column_mapping import read_by_physical_names
from reconciler.engine.delta.log import PathLike, delete_remote, is_local, s3a_settings, table_uri
from reconciler.engine.delta.tables import COMMIT_TAG, DeltaTables
from reconciler.engine.delta.versions import DeltaVersion
from reconciler.engine.delta.writers import WRITERS, DeltaWriter, Writer
from reconciler.engine.spark.schema import conform, loosened, same_schema
from reconciler.engine.spark.session import has_delta_extension
from reconciler.support.errors import ReconcileError


def chosen_writer(spark: SparkSession) -> Writer:
    """delta-spark when the session has Delta's SQL extension, else delta-rs; the
    `RECONCILE_DELTA_WRITER` environment variable (`delta-spark`, `delta-rs`, `auto`)
    forces one, e.g. the fallback on a laptop where small steps matter more than parity."""
    forced = os.environ.get("RECONCILE_DELTA_WRITER", "auto").strip().lower()
    if forced not in ("auto", "delta-spark", "delta-rs"):
        raise ReconcileError(f"RECONCILE_DELTA_WRITER={forced!r}: use delta-spark, delta-rs "
                             "or auto")
    if forced == "delta-spark" and not has_delta_extension(spark):
        raise ReconcileError("RECONCILE_DELTA_WRITER=delta-spark, but the Spark session has "
                             "no Delta extension (run `make jars`, or give the cluster Delta)")
    if forced != "auto":
        return forced  # type: ignore[return-value]  # a writer's name: checked above
    if has_delta_extension(spark):
        return "delta-spark"
    _say_once(FALLBACK_NOTICE)
    return "delta-rs"


FALLBACK_NOTICE = ("reconcile: this Spark session has no Delta Lake, so the delta-rs fallback "
                   "writes the tables; for Delta's own writer on embedded Spark run "
                   "`python -m reconciler.engine.spark.jars` (Maven), on a cluster give it Delta "
                   "(docs/clusters.md); RECONCILE_DELTA_WRITER=delta-rs silences this")
_said: set[str] = set()


def _say_once(line: str) -> None:
    """One line on stderr, once per process: which writer runs is said, not guessed."""
    if line not in _said:
        _said.add(line)
        print(line, file=sys.stderr)


__all__ = ["COMMIT_TAG", "DeltaStorage", "TableChange", "Writer", "chosen_writer"]


class TableChange(NamedTuple):
    """A table's change between two versions (`DeltaStorage.change_since`)."""

    inserts: DataFrame | None
    deletes: DataFrame | None
    from_feed: bool  # read from Delta's change data feed, not from the files that differ


ENGINE_COMMIT_BYTES = 512 * 1024
"""On Delta's writer, a table smaller than this is replaced (`DeltaStorage.replace_small`) by
the engine's own commit where its log allows: its few files leave Delta's per-column
statistics nothing to skip. A larger one keeps Delta's writer and its statistics. An append
(`DeltaStorage.append`, a step's ingest) is the engine's own commit whatever the table's
size where the log allows: Delta's writer computes the snapshot of the version it appends
to in 3 Spark jobs (seconds on a large table) only to add files, while the engine already
holds that version's log; the new files carry the statistics the engine writes (integers
and dates, `parquet_stats`: a step's keys); Delta's `OPTIMIZE`, the compaction of every
table Delta's writer keeps, rewrites them with its full statistics.
`RECONCILE_ENGINE_COMMIT_BYTES` changes the size; 0 leaves every commit of rows to Delta's
writer, appends included."""


def engine_commit_bytes() -> int:
    """`ENGINE_COMMIT_BYTES`, or the `RECONCILE_ENGINE_COMMIT_BYTES` environment variable."""
    value = os.environ.get("RECONCILE_ENGINE_COMMIT_BYTES", "").strip()
    if not value:
        return ENGINE_COMMIT_BYTES
    if not value.isdigit():
        raise ReconcileError(f"RECONCILE_ENGINE_COMMIT_BYTES={value!r}: use a number of bytes "
                             "(0: every commit of rows by Delta's writer)")
    return int(value)


class DeltaStorage(DeltaTables):
    """Create, write, read (pinned) and delete the Delta tables of a pipeline.

    ``writer`` is normally chosen from the session (``has_delta_extension``);
    pass ``"delta-rs"`` or ``"delta-spark"`` to force one. ``storage_options``
    go to delta-rs (and to ``pyarrow.fs`` for deleting remote tables); by
    default they come from the AWS environment variables (see
    ``default_storage_options``).
    """

    def __init__(
        self,
        spark: SparkSession,
        *,
        writer: Writer | None = None,
        storage_options: Mapping[str, str] | None = None,
    ):
        super().__init__(spark, storage_options)
        self.writer: DeltaWriter = WRITERS[writer or chosen_writer(spark)]
        self.engine_commit_bytes = engine_commit_bytes()
        conf = {**self.writer.session_conf, **s3a_settings()}
        for key, value in conf.items():
            spark.conf.set(key, value)

    def __repr__(self) -> str:
        return f"DeltaStorage(writer={self.writer!r})"

    def create(self, path: PathLike, schema: T.StructType, *, change_feed: bool = False,
               deletion_vectors: bool = True) -> int:
        """Create an empty table with this writer (`DeltaWriter.create`) and its properties;
        return the latest version of one that exists with this schema.

        For Delta's writer the table gets deletion vectors (unless ``deletion_vectors`` is
        False: a table others read, whose readers may predate them), and with
        ``change_feed`` the change data feed (a pipeline's tables: how a step reads what a
        delete changed).
        """
        return self.writer.create(self, table_uri(path), schema, self.writer.table_configuration(
            change_feed=change_feed, deletion_vectors=deletion_vectors))

    def overwrite(self, path: PathLike, df: DataFrame, schema: T.StructType,
                  app_transaction: tuple[str, int] | None = None) -> int:
        """Replace the contents (and schema) with ``df``; creates the table when missing.

        Used to recompute a view: older versions stay readable until vacuumed. An
        ``app_transaction`` (app id, version) is recorded by the same commit.
        """
        uri = table_uri(path)
        data = conform(df, schema, where=uri)
        return self.writer.overwrite(self, uri, data, schema, uuid.uuid4().hex, app_transaction)

    def replace(self, path: PathLike, df: DataFrame, schema: T.StructType) -> int:
        """Replace a table's rows with ``df`` of ``schema`` (a recomputed view): as
        `replace_small` does while the schema stays, else by `overwrite`, which changes it.

        Delta's Spark writer stores every column it writes as nullable, so a view whose
        query proves a column NOT NULL (`count(*)`) is held as nullable after its first
        overwrite there. That stored schema is kept: the view's rows fit it, and treating
        it as a change sent every later recompute through Delta's full overwrite (its
        snapshot jobs, seconds for a 20-row view) instead of the engine's commit."""
        latest = self.find(path)
        if latest is not None:
            stored = self.stored_schema(latest)
            if same_schema(stored, schema):
                return self.replace_small(latest, df, schema)
            if same_schema(stored, cast(T.StructType, loosened(schema))):
                return self.replace_small(latest, df, stored)
        return self.overwrite(path, df, schema)

    def replace_small(self, latest: DeltaVersion, rows: DataFrame, schema: T.StructType,
                      app_transaction: tuple[str, int] | None = None) -> int:
        """Replace every row of the table whose latest version is ``latest`` (a small one:
        `merge.OVERWRITE_SMALL_BYTES`, a grouped view, held - deleted + inserted).

        On Delta's writer an overwrite computes the snapshot of the version it replaces in
        Spark jobs to list its files: 5 jobs and 1.8 s for 20 rows on 2 cores in a warm
        session. Where that version's log allows (`_engine_commits`) the engine's own
        commit does it instead (Spark writes the Parquet files, delta-rs commits them and
        removes the files the log lists): 1 job, 0.3 s. Readers see a Delta table either
        way."""
        writer = WRITERS["delta-rs"] if self._engine_commits(latest, True) else self.writer
        data = conform(rows, schema, where=latest.uri)
        return writer.overwrite(self, latest.uri, data, schema, uuid.uuid4().hex,
                                app_transaction)

    def _engine_commits(self, latest: DeltaVersion, replaces_rows: bool) -> bool:
        """Whether a commit to ``latest`` on Delta's writer is the engine's own instead: an
        append whose log allows it (`DeltaVersion.appendable_by_engine`), or a replacement of
        a table of at most `engine_commit_bytes` whose log allows it
        (`replaceable_by_engine`)."""
        if not self.writer.marks_rows:  # the delta-rs writer: every commit is the engine's
            return False
        if not replaces_rows:  # an append, whatever the size (`ENGINE_COMMIT_BYTES`)
            return self.engine_commit_bytes > 0 and latest.appendable_by_engine
        stored = latest.data_bytes() if latest.replaceable_by_engine else None
        return stored is not None and stored < self.engine_commit_bytes

    def append(
        self,
        path: PathLike,
        df: DataFrame,
        *,
        app_id: str | None = None,
        txn_version: int | None = None,
    ) -> int:
        """Append ``df`` (conformed to the table's schema); returns the resulting version.

        With ``app_id`` and ``txn_version`` the append is idempotent like Delta's
        app transactions: if the table already records ``txn_version`` (or a later
        one) for ``app_id``, nothing is written and the current version is
        returned. Otherwise the commit records ``(app_id, txn_version)`` with the
        data, atomically, so a crash between the two cannot happen. An empty
        ``df`` still commits, so the transaction version advances.
        """
        if (app_id is None) != (txn_version is None):
            raise ValueError("app_id and txn_version go together")
        latest = self.find(path)
        if latest is None:
            raise ReconcileError(f"{table_uri(path)}: no Delta table there to append to")
        transaction = None
        if app_id is not None and txn_version is not None:
            done = latest.recorded_transaction(app_id)
            if done is not None and done >= txn_version:
                return latest.version
            transaction = (app_id, txn_version)
        # Delta's append of two rows with an app transaction computes the table's snapshot
        # in 3 Spark jobs, 1.2 s of the seed story's 2-row `execute` on 2 cores; the
        # engine's commit reads the transaction from the log `find` opened.
        writer = WRITERS["delta-rs"] if self._engine_commits(latest, False) else self.writer
        schema = self.stored_schema(latest)
        return writer.append(self, latest.uri, conform(df, schema, where=latest.uri), schema,
                             uuid.uuid4().hex, latest.table, transaction)

    def restore(self, path: PathLike, version: int) -> int:
        """Make the table's contents those of ``version`` again, in a new version.

        Used to discard a write that no manifest committed (an `execute` that crashed);
        app-transaction versions are not rolled back, which is what callers rely on.
        """
        return self.writer.restore(self, table_uri(path), version)

    def read(self, path: PathLike, version: int, schema: T.StructType) -> DataFrame:
        """A DataFrame of the table exactly as of ``version`` (later writes are invisible).

        Whoever wrote the table, delta-rs lists the data files of that version from its
        log and Spark scans them with ``schema``: lazy and parallel, and without the
        Spark jobs Delta's reader spends rebuilding a snapshot (three per pinned read,
        seconds on a small table). Like every Spark file source, the result's columns are
        nullable; the declared NOT NULL lives in the Delta schema and is enforced on write.
        Versions whose files are not plain parquet-by-name (rows marked deleted in
        deletion vectors, column mapping, partition values in paths) need Delta's own
        reader: delta-spark's ``versionAsOf``.
        """
        return self.read_version(self.at(path, version), schema)

    def read_version(self, at: DeltaVersion, schema: T.StructType) -> DataFrame:
        """`read` of a version already opened."""
        if not at.files_are_rows:
            return self.writer.read_marked(self, at.uri, at.version, schema)
        if not at.column_mapped:
            return self.scan(at.files, schema)
        return read_by_physical_names(self.scan, at.files, self.stored_schema(at), schema, at.uri)

    def has_change_feed(self, path: PathLike) -> bool:
        """Whether the table's change between versions is read from Delta's change data feed
        (`read_change_feed`) rather than from the data files that differ (`changed_files`)."""
        if not self.writer.reads_change_feed:
            return False
        latest = self.find(path)
        return latest is not None and latest.change_feed

    def read_change_feed(self, path: PathLike, since: int, latest: int,
                         schema: T.StructType) -> tuple[DataFrame, DataFrame]:
        """Rows inserted and rows deleted between versions ``since`` (exclusive) and
        ``latest``, from Delta's change data feed: a delete that only marked rows in a
        deletion vector left the data files as they were, so comparing files cannot see it.
        An update's old and new rows are a deletion and an insertion."""
        uri = table_uri(path)
        feed = (self.spark.read.format("delta").option("readChangeFeed", "true")
                .option("startingVersion", since + 1).option("endingVersion", latest)
                .load(uri))
        kind = F.col("_change_type")
        inserts = feed.filter(kind.isin("insert", "update_postimage"))
        deletes = feed.filter(kind.isin("delete", "update_preimage"))
        return (conform(inserts, schema, where=uri), conform(deletes, schema, where=uri))

    def change_since(self, path: PathLike, since: int, latest: int, schema: T.StructType,
                     old_schema: T.StructType | None = None, *,
                     nets: bool = False) -> TableChange:
        """The rows a table gained and lost after version ``since``, up to ``latest``.

        A table keeping Delta's change data feed says its change itself (deletes and
        updates included: a delete that only marked rows in a deletion vector left the
        files as they were), unless its log shows that files were only added
        (`whole_file_change`): then the change is those files' rows, with no delete side.
        Any other changed in its data files alone: the rows of the files ``latest`` has
        and ``since`` had not are inserted, those of the reverse deleted (read with
        ``old_schema``, the columns ``since`` had). A side with no files is None, so a
        caller knows an append-only change without reading a row.

        `nets`: the caller nets the change (a pipeline's own table, `step.table_change`),
        so a feed table whose whole files were replaced (`whole_file_change`: a small
        table's change written as a rewrite, `merge.OVERWRITE_SMALL_BYTES`) is read from
        those files, as a table without the feed is, instead of through Delta's feed
        reader; rows a compaction only moved then cancel out in the net."""
        return self.change_between(self.at(path, latest), since, schema, old_schema,
                                   nets=nets)

    def change_between(self, after: DeltaVersion, since: int, schema: T.StructType,
                       old_schema: T.StructType | None = None, *,
                       nets: bool = False) -> TableChange:
        """`change_since` up to a version already opened (asked both questions: its feed,
        else its files)."""
        if self.writer.reads_change_feed and after.change_feed:
            files = self.whole_file_change(after, since)
            if files is None or (files[1] and not nets):  # the feed says what files cannot
                return TableChange(*self.read_change_feed(after.uri, since, after.version,
                                                          schema), from_feed=True)
            added, removed = files
        else:
            added, removed = self.files_between(after, since)
        return TableChange(self.scan(added, schema) if added else None,
                           self.scan(removed, old_schema or schema) if removed else None,
                           from_feed=False)

    def row_count(self, path: PathLike, version: int) -> int:
        """Rows in the table at ``version`` (`rows_in`)."""
        return self.rows_in(self.at(path, version))

    def rows_in(self, at: DeltaVersion) -> int:
        """Rows in a version already opened: from the log's per-file stats when all files have
        them, less the rows deletion vectors mark (no data read), else by counting a pinned
        read."""
        if not at.partitioned:
            counts = at.add_actions().column("num_records")
            if counts.null_count == 0:
                return int(sum(counts.to_pylist())) - at.deleted_rows
        return self.read_version(at, self.stored_schema(at)).count()

    def delete(self, path: PathLike) -> None:
        """Remove the whole table folder (data and log). Missing is fine.

        Only for a view or table the manifest no longer points at; callers decide when.
        """
        uri = table_uri(path)
        self.forget(uri)
        if is_local(uri):
            if os.path.isdir(uri):
                shutil.rmtree(uri)
            elif os.path.exists(uri):
                raise ReconcileError(f"{uri}: not a table folder, refusing to delete it")
            return
        delete_remote(uri, self.storage_options(uri))
