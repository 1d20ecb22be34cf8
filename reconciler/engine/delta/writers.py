"""The two ways a pipeline's Delta tables are written, one class each.

`DeltaStorage` (`engine/delta/storage.py`) holds one of these, chosen once from the
session (`storage.chosen_writer`), and asks it for what differs between them;
everything else (versions, file scans, delta-rs's table creation) is shared, in
`engine.delta.tables`, which is all a writer uses: writers never call back into
the storage that holds them. Callers outside storage read a writer's capabilities
(`marks_rows`, `compacts`, `evolves_in_the_log`, `reads_change_feed`), never its name.

* `DeltaSparkWriter`: Spark writes `format("delta")` with Delta Lake's jars, the
  writer users run on a cluster; Delta's own CREATE TABLE (where its DDL declares
  the schema) and app transactions, MERGE with deletion vectors, RESTORE, its change
  data feed and log-only schema changes.
* `DeltaRsWriter`: Spark's executors write Parquet files and delta-rs commits them
  (`engine/delta/commit.py`), where the session has no Delta jars; deletes rewrite the
  files that hold them, and the table's change is read from the files that differ.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Literal

from deltalake import CommitProperties, DeltaTable
from pyspark.sql import DataFrame, DataFrameWriter
from pyspark.sql import types as T

from reconciler.engine.delta.commit import (
    PARQUET_CONF,
    CommitOf,
    commit_files,
    write_errors,
    write_files,
)
from reconciler.engine.delta.files import Collected, FileStore
from reconciler.engine.delta.log import check_delta_rs_location
from reconciler.engine.delta.tables import COMMIT_TAG, DeltaTables
from reconciler.engine.spark.schema import CHAR_VARCHAR_METADATA_KEY, conform, quoted
from reconciler.engine.spark.session import session_settings
from reconciler.support.errors import ReconcileError
from reconciler.support.faults import crash_point

Writer = Literal["delta-spark", "delta-rs"]
USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
"""The session setting Delta's Spark commits take their `userMetadata` from: a write id, so
that a commit made by a SQL statement is the engine's too (`delta.drift.own_commit`)."""

DELTA_SPARK_CONF = {
    # Delta refuses a NOT NULL nested in an array or a map (it cannot enforce it); such a
    # column is declared as written and its nested NOT NULL stays unchecked (docs/limitations.md).
    "spark.databricks.delta.constraints.allowUnenforcedNotNull.enabled": "true",
} | PARQUET_CONF  # the engine's own commits write Parquet beside Delta's (`replace_small`)

DELETION_VECTORS = {"delta.enableDeletionVectors": "true"}
"""Deletes and retractions mark rows in a deletion vector instead of rewriting files."""
CHANGE_FEED = {"delta.enableChangeDataFeed": "true"}
"""A table's deleted rows are kept for Delta's change data feed: how a step reads a
table's change when a delete left its files in place (`read_change_feed`)."""


class DeltaWriter:
    """What differs between the writers. `tables` is the shared part of the storage that
    holds this writer (`engine.delta.tables`). The rows a writer is given are already
    shaped to the table's schema (`DeltaStorage` conforms them where they enter)."""

    name: Writer
    session_conf: Mapping[str, str]
    marks_rows: bool
    """Deletes mark rows in deletion vectors (Delta's MERGE) rather than rewrite files."""
    compacts: bool
    """Small files are compacted by the reconciler (`engine/delta/compaction.py`); Delta's own
    OPTIMIZE is the tool where Delta writes."""
    evolves_in_the_log: bool
    """Dropped columns, a dropped NOT NULL and added columns are commits without data."""
    reads_change_feed: bool
    """A table's change between versions can come from Delta's change data feed."""
    maintained_refresh_seconds: float
    """What maintaining a view is assumed to cost at least, before any view of the pipeline
    was timed maintaining (`refresh: auto`'s third rule,
    `engine.maintenance.refresh_choice`): mostly the Spark jobs and commits of its writes."""

    def __repr__(self) -> str:
        return self.name

    def table_configuration(self, *, change_feed: bool, deletion_vectors: bool
                            ) -> dict[str, str]:
        """Table properties a new table of this writer gets."""
        raise NotImplementedError

    def create(self, tables: DeltaTables, uri: str, schema: T.StructType,
               configuration: Mapping[str, str]) -> int:
        """Create an empty table with these properties, or return the latest version of one
        with this schema (`DeltaTables.existing_version`)."""
        raise NotImplementedError

    def overwrite(self, tables: DeltaTables, uri: str, data: DataFrame,
                  schema: T.StructType, tag: str, app_transaction: tuple[str, int] | None
                  ) -> int:
        """Replace the table's contents with `data` (conformed) in one tagged commit."""
        raise NotImplementedError

    def append(self, tables: DeltaTables, uri: str, data: DataFrame, schema: T.StructType,
               tag: str, table: DeltaTable, transaction: tuple[str, int] | None) -> int:
        """Add `data`'s rows (conformed) in one tagged commit recording `transaction`, if
        any."""
        raise NotImplementedError

    def restore(self, tables: DeltaTables, uri: str, version: int) -> int:
        """Make the table's contents those of `version` again, in a new version."""
        raise NotImplementedError

    def read_marked(self, tables: DeltaTables, uri: str, version: int,
                    schema: T.StructType) -> DataFrame:
        """A version whose files are not its rows (marked rows, column mapping, partitions)."""
        raise ReconcileError(f"{uri}: partitioned, column-mapped or deletion-vector tables "
                             "need Delta's Spark reader (delta-spark on the cluster)")


class DeltaSparkWriter(DeltaWriter):
    name: Writer = "delta-spark"
    session_conf = DELTA_SPARK_CONF
    marks_rows = True
    compacts = False
    evolves_in_the_log = True
    reads_change_feed = True
    # 2 cores, 2026-11-27: the step bench's views maintained over 100k rows took 1.0 s (the
    # filter view's append, the view over the aggregate replaced whole) to 2.8 s (the
    # aggregate) once generated code stayed compiled and small views were replaced by the
    # engine's own commits; it was 3 s when every commit of a maintained view ran Delta's
    # snapshot jobs (TPC-H's views at scale 0.1: 1.5 s at the fastest, 3.9 s the median).
    maintained_refresh_seconds = 1.0

    def table_configuration(self, *, change_feed: bool, deletion_vectors: bool
                            ) -> dict[str, str]:
        return ((DELETION_VECTORS if deletion_vectors else {}) |
                (CHANGE_FEED if change_feed else {}))

    def create(self, tables: DeltaTables, uri: str, schema: T.StructType,
               configuration: Mapping[str, str]) -> int:
        """Delta's own `CREATE TABLE`, where its DDL declares `schema` exactly: the version
        it commits has Delta's checksum, so the table's first write runs one Spark job, not
        the five or six of a write that must first rebuild the state of a log delta-rs
        began (a new table written once: 1.53 s against 2.73 s on 2 cores,
        `bench/create_bench.py`). Other schemas are created by delta-rs
        (`DeltaTables.create_table`)."""
        if _refused_names(schema):  # Delta's documented way to store such names
            configuration = {**configuration, **COLUMN_MAPPING}
        if not _declarable(schema):
            return tables.create_table(uri, schema, configuration)
        existing = tables.existing_version(uri, schema)
        if existing is not None:
            return existing
        _clear_uncommitted_log(uri)
        properties = ", ".join(f"{_string(key)} = {_string(value)}"
                               for key, value in configuration.items())
        with write_errors(uri), session_settings(tables.spark,  # tagged: the engine's
                                                  {USER_METADATA: uuid.uuid4().hex}):
            tables.spark.sql(f"CREATE TABLE delta.{quoted(uri)} ({_columns(schema)}) USING delta"
                             + (f" TBLPROPERTIES ({properties})" if properties else ""))
        return 0  # a new table's first commit: no need to read the log back

    def overwrite(self, tables: DeltaTables, uri: str, data: DataFrame,
                  schema: T.StructType, tag: str, app_transaction: tuple[str, int] | None
                  ) -> int:
        before = tables.latest_version(uri)
        if before is None:  # created as `create` does: with deletion vectors
            before = self.create(tables, uri, schema, self.table_configuration(
                change_feed=False, deletion_vectors=True))
        writer = data.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
        return _save(tables, writer, uri, tag, app_transaction, before)

    def append(self, tables: DeltaTables, uri: str, data: DataFrame, schema: T.StructType,
               tag: str, table: DeltaTable, transaction: tuple[str, int] | None) -> int:
        # Delta records (txnAppId, txnVersion) atomically with the commit, and skips the
        # write if a concurrent one recorded it first.
        writer = data.write.format("delta").mode("append")
        return _save(tables, writer, uri, tag, transaction, table.version())

    def restore(self, tables: DeltaTables, uri: str, version: int) -> int:
        with session_settings(tables.spark, {USER_METADATA: uuid.uuid4().hex}):  # ours
            tables.spark.sql(f"RESTORE TABLE delta.`{uri}` TO VERSION AS OF {int(version)}")
        latest = tables.latest_version(uri)
        if latest is None:
            raise ReconcileError(f"{uri}: no Delta table there to restore")
        return latest

    def read_marked(self, tables: DeltaTables, uri: str, version: int,
                    schema: T.StructType) -> DataFrame:
        df = tables.spark.read.format("delta").option("versionAsOf", version).load(uri)
        return conform(df, schema, where=uri)


REFUSED_NAME_CHARACTERS = frozenset(" ,;{}()\n\t=")
"""Characters Delta's writer refuses in a column name unless the table maps its columns
(`COLUMN_MAPPING`): what Spark names an unaliased `avg(x)`, or a spaced alias."""
COLUMN_MAPPING = {"delta.columnMapping.mode": "name"}
"""The Parquet files name columns by physical names (`col-<uuid>`), the log keeps the
logical ones, so any name Spark allows is stored (Delta upgrades the table's protocol to
reader 2, writer 5 or table features: docs/limitations.md names the older readers)."""


def _clear_uncommitted_log(uri: str) -> None:
    """Remove the `_delta_log` folder of a table that has no commit (`existing_version` found
    none): what a create stopped before its first commit leaves (Ctrl-C during a first
    deployment). Spark takes the folder alone for a table, so its `CREATE TABLE` refused
    every retry (TABLE_OR_VIEW_ALREADY_EXISTS); no manifest can name a table without a
    version, and the pipeline's lock keeps other writers out."""
    FileStore.for_root(uri).remove_tree(f"{uri}/_delta_log", dry_run=False, done=Collected())


def _refused_names(data_type: T.DataType) -> bool:
    """Whether a column name at any depth has a character Delta refuses without mapping."""
    if isinstance(data_type, T.StructType):
        return any(REFUSED_NAME_CHARACTERS & set(field.name) or _refused_names(field.dataType)
                   for field in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return _refused_names(data_type.elementType)
    if isinstance(data_type, T.MapType):
        return _refused_names(data_type.keyType) or _refused_names(data_type.valueType)
    return False


def _declarable(data_type: T.DataType, in_collection: bool = False) -> bool:
    """Whether Delta's DDL creates a table of exactly this type. It declares no NOT NULL
    inside an array or a map (a nested field's included), refuses interval columns, and
    a CHAR or VARCHAR column comes out as another schema than `same_schema` compares."""
    if isinstance(data_type, T.StructType):
        return all(CHAR_VARCHAR_METADATA_KEY not in (field.metadata or {})
                   and (field.nullable or not in_collection)
                   and _declarable(field.dataType, in_collection) for field in data_type.fields)
    if isinstance(data_type, T.ArrayType):
        return data_type.containsNull and _declarable(data_type.elementType, True)
    if isinstance(data_type, T.MapType):
        return (data_type.valueContainsNull and _declarable(data_type.keyType, True)
                and _declarable(data_type.valueType, True))
    return not isinstance(data_type, (T.DayTimeIntervalType, T.YearMonthIntervalType,
                                       T.CalendarIntervalType, T.CharType, T.VarcharType,
                                       T.NullType))


def _columns(schema: T.StructType) -> str:
    """`schema` as a DDL's column list. Rendered here, not by `StructType.toDDL`, which
    asks the thread's active session (none in a refresh's worker thread over Connect)."""
    return ", ".join(_field(field, " ") for field in schema.fields)


def _field(field: T.StructField, separator: str) -> str:
    return (f"{quoted(field.name)}{separator}{_type(field.dataType)}"
            f"{'' if field.nullable else ' NOT NULL'}")


def _type(data_type: T.DataType) -> str:
    """A declarable type (`_declarable`) in Spark SQL's syntax."""
    if isinstance(data_type, T.StructType):
        return f"STRUCT<{', '.join(_field(field, ': ') for field in data_type.fields)}>"
    if isinstance(data_type, T.ArrayType):
        return f"ARRAY<{_type(data_type.elementType)}>"
    if isinstance(data_type, T.MapType):
        return f"MAP<{_type(data_type.keyType)}, {_type(data_type.valueType)}>"
    return data_type.simpleString()


def _string(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _save(tables: DeltaTables, writer: DataFrameWriter, uri: str, tag: str,
          transaction: tuple[str, int] | None, before: int) -> int:
    """Delta's write of `writer` to `uri`, tagged, recording `transaction` (app id, version)
    with the commit; the version it made."""
    writer = writer.option("userMetadata", tag)
    if transaction is not None:
        writer = writer.option("txnAppId", transaction[0]).option("txnVersion",
                                                                  str(transaction[1]))
    with write_errors(uri):
        writer.save(uri)
    return tables.rs_commit_version(uri, tag, before)


class DeltaRsWriter(DeltaWriter):
    name: Writer = "delta-rs"
    session_conf = PARQUET_CONF
    marks_rows = False
    compacts = True
    evolves_in_the_log = False
    reads_change_feed = False
    # 2 cores: a step maintaining `bench/step_bench.py`'s four views over 16M rows takes
    # 2.1 s (no Spark job per commit).
    maintained_refresh_seconds = 1.0

    def table_configuration(self, *, change_feed: bool, deletion_vectors: bool
                            ) -> dict[str, str]:
        return {}

    def create(self, tables: DeltaTables, uri: str, schema: T.StructType,
               configuration: Mapping[str, str]) -> int:
        return tables.create_table(uri, schema, configuration)

    def overwrite(self, tables: DeltaTables, uri: str, data: DataFrame,
                  schema: T.StructType, tag: str, app_transaction: tuple[str, int] | None
                  ) -> int:
        check_delta_rs_location(uri)
        table = tables.open(uri)
        before = None if table is None else table.version()
        files = write_files(tables.spark, data, uri, schema)
        commit_files(uri, files, schema,
                     CommitOf(tag, overwrite=True, app_transaction=app_transaction),
                     table=table, storage_options=tables.storage_options(uri))
        return tables.rs_commit_version(uri, tag, before)

    def append(self, tables: DeltaTables, uri: str, data: DataFrame, schema: T.StructType,
               tag: str, table: DeltaTable, transaction: tuple[str, int] | None) -> int:
        before = table.version()
        files = write_files(tables.spark, data, uri, schema)
        crash_point("storage-before-commit")  # the files exist, no log names them yet
        commit_files(uri, files, schema, CommitOf(tag, app_transaction=transaction),
                     table=table, storage_options=tables.storage_options(uri))
        return tables.rs_commit_version(uri, tag, before)

    def restore(self, tables: DeltaTables, uri: str, version: int) -> int:
        table = tables.require(uri)
        table.restore(version, commit_properties=CommitProperties(
            custom_metadata={COMMIT_TAG: uuid.uuid4().hex}))  # the engine's: no drift
        return table.version()


WRITERS: dict[Writer, DeltaWriter] = {"delta-spark": DeltaSparkWriter(),
                                      "delta-rs": DeltaRsWriter()}
