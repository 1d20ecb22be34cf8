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
  (``engine/writer.py``); no rows pass through the driver.

Whoever wrote a table, its versions, schema, row counts and each version's data
files are read from the log by delta-rs (no JVM, no Spark job), and a pinned read
is Spark scanning that version's files with the declared schema, lazily and in
parallel. Both produce ordinary Delta tables that either writer, and any other
Delta reader, can open.

Each committing write tags its commit (``reconciler.commit`` in delta-rs commit
info, ``userMetadata`` in delta-spark) and looks that tag up in the history, so
the version returned is the version of *this* write even if something else
committed right after it. Locating tables and reading their logs is ``delta_log``'s job.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Mapping

import pyarrow as pa
from deltalake import DeltaTable
from deltalake.table import TableFeatures
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reconciler.engine.column_mapping import by_logical_names, physical_schema
from reconciler.engine.deletion_vectors import live_files
from reconciler.engine.delta_log import (
    PathLike,
    check_delta_rs_location,
    default_storage_options,
    delete_remote,
    hadoop_uri,
    has_change_feed,
    has_deletion_vectors,
    is_column_mapped,
    is_local,
    needs_delta_reader,
    open_delta_rs,
    s3a_settings,
    spark_local_path,
    table_uri,
)
from reconciler.engine.delta_writers import COMMIT_TAG, WRITERS, DeltaWriter, Writer
from reconciler.engine.local_rows import empty_frame
from reconciler.engine.schema import arrow_schema, conform, same_schema, struct_from_json
from reconciler.engine.session import has_delta_extension
from reconciler.errors import ReconcileError

_HISTORY_SCAN = 32
"""How far back in the history to look for our own commit tag before falling back."""


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
        return forced  # type: ignore[return-value]
    return "delta-spark" if has_delta_extension(spark) else "delta-rs"


__all__ = ["COMMIT_TAG", "DeltaStorage", "Writer", "chosen_writer"]


class DeltaStorage:
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
        self.spark = spark
        self.writer: DeltaWriter = WRITERS[writer or chosen_writer(spark)]
        self._storage_options = dict(storage_options) if storage_options is not None else None
        conf = {**self.writer.session_conf, **s3a_settings()}
        for key, value in conf.items():
            spark.conf.set(key, value)

    def __repr__(self) -> str:
        return f"DeltaStorage(writer={self.writer!r})"

    # -- shared helpers --------------------------------------------------------------
    def storage_options(self, uri: str) -> dict[str, str]:
        """Options for delta-rs for this location (explicit ones win over the environment)."""
        return default_storage_options(uri) | (self._storage_options or {})

    def open(self, uri: str, version: int | None = None) -> DeltaTable | None:
        """The delta-rs handle of a table (at ``version``), or None when there is no table."""
        return open_delta_rs(uri, version, self._storage_options)

    def require(self, uri: str, version: int | None = None) -> DeltaTable:
        table = self.open(uri, version)
        if table is None:
            raise ReconcileError(f"{uri}: no Delta table there")
        return table

    def _at_version(self, uri: str, version: int) -> DeltaTable:
        try:
            return self.require(uri, version)
        except ReconcileError:
            raise
        except Exception as error:  # delta-rs: version missing or vacuumed
            raise ReconcileError(f"{uri}: cannot load Delta version {version}: {error}") from None

    # -- public API -------------------------------------------------------------------
    def latest_version(self, path: PathLike) -> int | None:
        """The newest committed version, or None when there is no Delta table at ``path``."""
        table = self.open(table_uri(path))
        return None if table is None else table.version()

    def table_schema(self, path: PathLike) -> T.StructType | None:
        """The table's current schema as recorded in its log, or None when there is no table."""
        uri = table_uri(path)
        table = self.open(uri)
        return None if table is None else struct_from_json(table.schema().to_json())

    def create(self, path: PathLike, schema: T.StructType, *, change_feed: bool = False,
               deletion_vectors: bool = True) -> int:
        """Create an empty table; if one exists with the same schema, return its latest version.

        An existing table with another schema is an error: replacing state is the
        caller's decision (``delete`` first, or ``overwrite``). Whichever writer fills
        it, delta-rs creates it, in one metadata-only commit: Delta's Spark writer would
        make every column nullable when a DataFrame creates a table, and its
        `DeltaTable.createIfNotExists` needs Delta's plugin on a Spark Connect server.
        For Delta's writer the table gets deletion vectors (unless ``deletion_vectors`` is
        False: a table others read, whose readers may predate them), and with
        ``change_feed`` the change data feed (a pipeline's tables: how a step reads what a
        delete changed).
        """
        uri = table_uri(path)
        current = self.latest_version(uri)
        if current is not None:
            existing = self.table_schema(uri)
            if existing is not None and not same_schema(existing, schema):
                raise ReconcileError(
                    f"{uri}: a Delta table with another schema exists "
                    f"({existing.simpleString()} instead of {schema.simpleString()})"
                )
            return current
        check_delta_rs_location(uri)
        configuration = self.writer.table_configuration(change_feed=change_feed,
                                                        deletion_vectors=deletion_vectors)
        created = DeltaTable.create(
            uri,
            schema=arrow_schema(schema),
            mode="ignore",
            configuration=configuration or None,
            storage_options=self.storage_options(uri),
        )
        protocol = created.protocol()
        if (protocol.min_writer_version >= 7 and "invariants" not in
                (protocol.writer_features or []) and _has_not_null(schema)):
            # Table features (e.g. timestampNtz) make delta-rs list each feature, and it
            # leaves out the invariants a NOT NULL column implies; Delta's Spark writer
            # then refuses the table (DELTA_FEATURES_PROTOCOL_METADATA_MISMATCH).
            created.alter.add_feature(TableFeatures.Invariants,
                                      allow_protocol_versions_increase=True)
        return created.version()

    def overwrite(self, path: PathLike, df: DataFrame, schema: T.StructType,
                  app_transaction: tuple[str, int] | None = None) -> int:
        """Replace the contents (and schema) with ``df``; creates the table when missing.

        Used to recompute a view: older versions stay readable until vacuumed. An
        ``app_transaction`` (app id, version) is recorded by the same commit.
        """
        uri = table_uri(path)
        data = conform(df, schema, where=uri)
        return self.writer.overwrite(self, uri, data, schema, uuid.uuid4().hex, app_transaction)

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
        uri = table_uri(path)
        tag = uuid.uuid4().hex
        table = self.open(uri)
        if table is None:
            raise ReconcileError(f"{uri}: no Delta table there to append to")
        transaction = None
        if app_id is not None and txn_version is not None:
            done = table.transaction_version(app_id)
            if done is not None and done >= txn_version:
                return table.version()
            transaction = (app_id, txn_version)
        schema = struct_from_json(table.schema().to_json())
        return self.writer.append(self, uri, df, schema, tag, table, transaction)

    def transaction_version(self, path: PathLike, app_id: str) -> int | None:
        """The last app-transaction version recorded for ``app_id``; None if none (or no table)."""
        table = self.open(table_uri(path))
        return None if table is None else table.transaction_version(app_id)

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
        uri = table_uri(path)
        table = self._at_version(uri, version)
        if not table.metadata().partition_columns and not self._marks_rows(uri, table, version):
            if not is_column_mapped(table):
                return self.scan(table.file_uris(), schema)
            return self._scan_physical(table, schema)
        return self.writer.read_marked(self, uri, version, schema)

    @staticmethod
    def _marks_rows(uri: str, table: DeltaTable, version: int) -> bool:
        """Whether some rows of this version's files are marked deleted (deletion vectors)."""
        return has_deletion_vectors(table) and live_files(uri, version).deleted_rows > 0

    def _scan_physical(self, table: DeltaTable, schema: T.StructType) -> DataFrame:
        """A column-mapped version's files, read by the columns' physical names."""
        stored = struct_from_json(table.schema().to_json())
        return by_logical_names(self.scan(table.file_uris(), physical_schema(stored, schema,
                                                                             table.table_uri)),
                                schema)

    def has_change_feed(self, path: PathLike) -> bool:
        """Whether the table's change between versions is read from Delta's change data feed
        (`read_change_feed`) rather than from the data files that differ (`changed_files`)."""
        if not self.writer.reads_change_feed:
            return False
        table = self.open(table_uri(path))
        return table is not None and has_change_feed(table)

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

    def changed_files(self, path: PathLike, since: int | None) -> tuple[list[str], list[str]]:
        """Data files the latest version has that ``since``'s had not, and the reverse: a
        table's change between two versions lies in these files alone."""
        uri = table_uri(path)
        table = self.require(uri)
        if needs_delta_reader(table) or has_deletion_vectors(table):
            raise ReconcileError(f"{uri}: partitioned, column-mapped or deletion-vector tables "
                                 "change in more than their files (read their change feed)")
        before = [] if since is None else self._at_version(uri, since).file_uris()
        now = table.file_uris()
        known, current = set(before), set(now)
        return [f for f in now if f not in known], [f for f in before if f not in current]

    def touched_rows(self, path: PathLike, since: int, version: int) -> int | None:
        """Rows a step's change touched between two versions, from the log alone: those of
        the data files one version has and the other not, and the rows deletion vectors
        newly mark (Delta's Spark writer deletes so); None without per-file stats."""
        uri = table_uri(path)
        tables = [self._at_version(uri, at) for at in (since, version)]
        before, after = (dict(zip(*(pa.table(table.get_add_actions(flatten=True))
                                    .column(name).to_pylist()
                                    for name in ("path", "num_records")), strict=True))
                         for table in tables)
        touched = [rows for files, others in ((after, before), (before, after))
                   for file, rows in files.items() if file not in others]
        if None in touched:
            return None
        marked = abs(live_files(uri, version).deleted_rows - live_files(uri, since).deleted_rows
                     ) if has_deletion_vectors(tables[1]) else 0
        return sum(touched) + marked

    def scan(self, files: list[str], schema: T.StructType) -> DataFrame:
        """Spark reading these data files with ``schema`` (lazily, in parallel)."""
        if not files:
            return empty_frame(self.spark, schema)
        if all(is_local(file) for file in files):
            return self.spark.read.schema(schema).parquet(*[spark_local_path(f) for f in files])
        try:
            frame = self.spark.read.schema(schema).parquet(*[hadoop_uri(f) for f in files])
            _ = frame.schema  # Spark Connect analyses lazily: make a missing filesystem fail here
            return frame
        except Exception as error:  # no Hadoop filesystem for the scheme (e.g. s3, no hadoop-aws)
            raise ReconcileError(f"Spark cannot read {files[0]}: {_first_line(error)}; "
                                 "add the filesystem's jars (e.g. hadoop-aws)") from None

    def row_count(self, path: PathLike, version: int) -> int:
        """Rows in the table at ``version``: from the log's per-file stats when all files have
        them, less the rows deletion vectors mark (no data read), else by counting a pinned
        read."""
        uri = table_uri(path)
        table = self._at_version(uri, version)
        if not table.metadata().partition_columns:
            counts = pa.table(table.get_add_actions(flatten=True)).column("num_records")
            if counts.null_count == 0:
                deleted = live_files(uri, version).deleted_rows if has_deletion_vectors(
                    table) else 0
                return int(sum(counts.to_pylist())) - deleted
        return self.read(uri, version, struct_from_json(table.schema().to_json())).count()

    def delete(self, path: PathLike) -> None:
        """Remove the whole table folder (data and log). Missing is fine.

        Only for a view or table the manifest no longer points at; callers decide when.
        """
        uri = table_uri(path)
        if is_local(uri):
            if os.path.isdir(uri):
                shutil.rmtree(uri)
            elif os.path.exists(uri):
                raise ReconcileError(f"{uri}: not a table folder, refusing to delete it")
            return
        delete_remote(uri, self.storage_options(uri))

    # -- delta-rs specifics --------------------------------------------------------
    def rs_commit_version(self, uri: str, tag: str, before: int | None) -> int:
        """The version our tagged commit got.

        Normally the one right after ``before``; only if another writer got in
        between is the history searched for the tag (``DeltaTable.history`` holds
        the GIL during its I/O, so it is kept off the common path).
        """
        table = self.require(uri)
        latest = table.version()
        if latest == (0 if before is None else before + 1):
            return latest
        if before is not None and latest == before:  # Delta skipped a write it had seen
            return latest
        for entry in table.history(_HISTORY_SCAN):
            if tag in (entry.get(COMMIT_TAG), entry.get("userMetadata")):
                return int(entry["version"])
        return latest


def _has_not_null(data_type: T.DataType) -> bool:
    if isinstance(data_type, T.StructType):
        return any(not field.nullable or _has_not_null(field.dataType)
                   for field in data_type.fields)
    return False


def _first_line(error: BaseException) -> str:
    lines = [line for line in str(error).splitlines() if line.strip()]
    return lines[0].strip() if lines else type(error).__name__

