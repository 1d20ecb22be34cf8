"""A pipeline's Delta tables as their logs describe them and Spark scans their files.

Whoever wrote a table, its versions, schema, row counts and each version's data
files are read from the log by delta-rs (no JVM, no Spark job): `at` opens a
version once into a `DeltaVersion` that answers what is asked of it. Spark reads a
change or a pinned version by scanning the data files the log names, with the
declared schema, lazily and in parallel (`scan`). Creating an empty table and
finding the version a tagged commit got are delta-rs's too.

This is what both writers (`engine.delta.writers`) build on, and what
`engine.delta.storage.DeltaStorage` adds its writes to: nothing here writes rows, so
nothing here depends on which writer a pipeline uses.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping

from deltalake import DeltaTable
from deltalake.table import TableFeatures
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from reconciler.engine.delta.log import (
    PathLike,
    check_delta_rs_location,
    default_storage_options,
    hadoop_uri,
    is_local,
    open_delta_rs,
    relative_file,
    spark_local_path,
    table_uri,
)
from reconciler.engine.delta.versions import DeltaVersion
from reconciler.engine.spark.local_rows import empty_frame
from reconciler.engine.spark.schema import arrow_schema, same_schema, struct_from_json
from reconciler.support.errors import ReconcileError

COMMIT_TAG = "reconciler.commit"
"""Commit-info key (delta-rs) carrying the id of the reconciler write that made the commit:
how ``rs_commit_version`` finds it."""
_HISTORY_SCAN = 32
"""How far back in the history to look for our own commit tag before falling back."""
KEPT_VERSIONS = 64
"""Opened versions each `DeltaTables` keeps (least recently used dropped first): a step
reads a relation at its pinned version many times (each view that reads it, the old and
the new frames, its change, its row count), and a committed version's log never changes,
so it is opened once. A handle holds its version's file list, hence a bound."""


class DeltaTables:
    """Open, inspect and scan a pipeline's Delta tables; create empty ones.

    ``storage_options`` go to delta-rs (and to ``pyarrow.fs`` for deleting remote
    tables); by default they come from the AWS environment variables (see
    ``default_storage_options``).
    """

    def __init__(self, spark: SparkSession, storage_options: Mapping[str, str] | None = None):
        self.spark = spark
        self._storage_options = dict(storage_options) if storage_options is not None else None
        self._kept: OrderedDict[tuple[str, int], DeltaVersion] = OrderedDict()
        self._kept_lock = threading.Lock()  # a streaming batch's callback runs on its own thread

    @property
    def options(self) -> dict[str, str] | None:
        """The explicit delta-rs options this storage was given (None: the environment's)."""
        return self._storage_options

    def storage_options(self, uri: str) -> dict[str, str]:
        """Options for delta-rs for this location (explicit ones win over the environment)."""
        return default_storage_options(uri) | (self._storage_options or {})

    def open(self, uri: str, version: int | None = None) -> DeltaTable | None:
        """The delta-rs handle of a table (at ``version``), or None when there is no table."""
        return open_delta_rs(uri, version, self._storage_options)

    def require(self, uri: str, version: int | None = None) -> DeltaTable:
        """The delta-rs handle of a table (at ``version``); an error names what is missing."""
        return self.at(uri, version).table

    def at(self, path: PathLike, version: int | None = None) -> DeltaVersion:
        """A table at ``version`` (the latest when None), opened once for all that is asked
        of it; an error names the table when it, or that version, is not there.

        A given version is opened once and kept (`KEPT_VERSIONS`): it is only read, never
        handed to a write, which may move a delta-rs handle on to the version it commits.
        The latest is opened afresh each time, as a write may follow."""
        uri = table_uri(path)
        if version is not None:
            with self._kept_lock:
                kept = self._kept.get((uri, version))
                if kept is not None:
                    self._kept.move_to_end((uri, version))
                    return kept
        try:
            table = self.open(uri, version)
        except ReconcileError:
            raise
        except Exception as error:  # delta-rs: version missing or vacuumed
            if version is None:
                raise
            raise ReconcileError(f"{uri}: cannot load Delta version {version}: {error}") from None
        if table is None:
            raise ReconcileError(f"{uri}: no Delta table there")
        opened = DeltaVersion(uri, table)
        if version is not None:
            self._keep(opened)
        return opened

    def _keep(self, opened: DeltaVersion) -> None:
        with self._kept_lock:
            self._kept[(opened.uri, opened.version)] = opened
            self._kept.move_to_end((opened.uri, opened.version))
            while len(self._kept) > KEPT_VERSIONS:
                self._kept.popitem(last=False)

    def forget(self, path: PathLike) -> None:
        """Drop the kept versions of a table that is deleted: one created at its place
        starts again at version 0."""
        uri = table_uri(path)
        with self._kept_lock:
            for key in [key for key in self._kept if key[0] == uri]:
                del self._kept[key]

    @staticmethod
    def stored_schema(at: DeltaVersion) -> T.StructType:
        """The schema a version's log records, as a Spark type."""
        return struct_from_json(at.table.schema().to_json())

    def find(self, path: PathLike) -> DeltaVersion | None:
        """The table's latest version, opened once for all that is asked of it (its number,
        its app transactions, its files), or None when there is no Delta table at ``path``."""
        uri = table_uri(path)
        table = self.open(uri)
        return None if table is None else DeltaVersion(uri, table)

    def kept_latest(self, path: PathLike) -> DeltaVersion | None:
        """The latest version (None: no table), opened once and kept as `at` keeps a given
        version, so the reads that pin it next (its row count, its rows) open nothing. For a
        reader only, like every kept version: a write opens its own handle."""
        latest = self.find(path)
        if latest is not None:
            self._keep(latest)
        return latest

    def latest_version(self, path: PathLike) -> int | None:
        """The newest committed version, or None when there is no Delta table at ``path``."""
        latest = self.find(path)
        return None if latest is None else latest.version

    def transaction_version(self, path: PathLike, app_id: str) -> int | None:
        """The last app-transaction version recorded for ``app_id``; None if none (or no table)."""
        latest = self.find(path)
        return None if latest is None else latest.recorded_transaction(app_id)

    def existing_version(self, uri: str, schema: T.StructType) -> int | None:
        """The latest version of the table at `uri` when one exists with `schema`; None when
        there is no table. One with another schema is an error: replacing state is the
        caller's decision (``delete`` first, or ``overwrite``)."""
        existing = self.find(uri)  # once: its version and its schema
        if existing is None:
            return None
        stored = self.stored_schema(existing)
        if not same_schema(stored, schema):
            raise ReconcileError(f"{uri}: a Delta table with another schema exists "
                                 f"({stored.simpleString()} instead of {schema.simpleString()})")
        return existing.version

    def create_table(self, path: PathLike, schema: T.StructType,
                     configuration: Mapping[str, str]) -> int:
        """Create an empty table with these table properties, with delta-rs, in one
        metadata-only commit; if one exists with the same schema, return its latest
        version (`existing_version`).

        Delta's Spark writer would make every column nullable when a DataFrame creates a
        table; it creates tables with its own DDL where that declares the schema
        (`DeltaSparkWriter.create`), and with this otherwise.
        """
        uri = table_uri(path)
        existing = self.existing_version(uri, schema)
        if existing is not None:
            return existing
        check_delta_rs_location(uri)
        created = DeltaTable.create(
            uri,
            schema=arrow_schema(schema),
            mode="ignore",
            configuration=dict(configuration) or None,
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

    def changed_files(self, path: PathLike, since: int | None,
                      latest: int | None = None) -> tuple[list[str], list[str]]:
        """Data files version ``latest`` (the newest when None) has that ``since``'s had not,
        and the reverse: a table's change between two versions lies in these files alone."""
        return self.files_between(self.at(path, latest), since)

    def files_between(self, after: DeltaVersion, since: int | None
                      ) -> tuple[list[str], list[str]]:
        """`changed_files` of a version already opened: its `whole_file_change`, which a
        table whose rows changed in more than whole files does not have."""
        files = self.whole_file_change(after, since)
        if files is None:
            raise ReconcileError(f"{after.uri}: partitioned, column-mapped or deletion-vector "
                                 "tables change in more than their files (read their change "
                                 "feed)")
        return files

    def whole_file_change(self, after: DeltaVersion, since: int | None
                          ) -> tuple[list[str], list[str]] | None:
        """The data files `after` added and those it removed since version `since` (None:
        no version, every file added), when whole files are all that changed: every file
        both versions hold has the same deletion vector, and no added or removed file has
        one (its rows are then exactly the file's). None for any other change, or where a
        table's files are not its rows (partitions, column mapping)."""
        if after.needs_delta_reader:
            return None
        before = None if since is None else self.at(after.uri, since)
        old_vectors = {} if before is None else before.vectors
        now = {relative_file(after.uri, file): file for file in after.files}
        then = {} if before is None else {relative_file(after.uri, file): file
                                          for file in before.files}
        if any(after.vectors.get(file) != old_vectors.get(file)
               for file in now.keys() & then.keys()):
            return None
        added = [file for file in now if file not in then]
        removed = [file for file in then if file not in now]
        if any(file in after.vectors for file in added) or \
                any(file in old_vectors for file in removed):
            return None
        return [now[file] for file in added], [then[file] for file in removed]

    def touched_rows(self, path: PathLike, since: int, version: int) -> int | None:
        """Rows a step's change touched between two versions, from the log alone: those of
        the data files one version has and the other not, and the rows deletion vectors
        newly mark (Delta's Spark writer deletes so); None without per-file stats."""
        versions = [self.at(path, at) for at in (since, version)]
        before, after = (dict(zip(*(at.add_actions().column(name).to_pylist()
                                    for name in ("path", "num_records")), strict=True))
                         for at in versions)
        touched = [rows for files, others in ((after, before), (before, after))
                   for file, rows in files.items() if file not in others]
        if None in touched:
            return None
        return int(sum(touched)) + abs(versions[1].deleted_rows - versions[0].deleted_rows)

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

    def rs_commit_version(self, uri: str, tag: str, before: int | None) -> int:
        """The version our tagged commit got.

        Normally the one right after ``before``; only if another writer got in
        between is the history searched for the tag (``DeltaTable.history`` holds
        the GIL during its I/O, so it is kept off the common path).
        """
        table = self.require(uri)
        latest = table.version()
        if latest == (0 if before is None else before + 1) or latest == before:
            # (equal to `before`: Delta skipped a write it had seen) The caller pins this
            # version next, and counts its rows: this handle is kept for that.
            self._keep(DeltaVersion(uri, table))
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
