"""Carry a table's rows to its new columns in place (`desired.model.table_evolution` says
whether and how).

A nullable column added at the end is one metadata-only Delta commit (existing
rows read NULL: no data file is read or written). On Delta's writer, dropped
columns and a dropped NOT NULL are changed in the log too: dropping a column
turns on Delta's column mapping first (`delta.columnMapping.mode = name`: the
Parquet files' columns are named by physical names, which the log maps to the
table's names, so a dropped column is only forgotten). Anything else that
evolves (widenings, a DEFAULT to fill, or any of these on the delta-rs
fallback) is a rewrite by Spark with a cast, which cannot fail or lose a value.

Rows appended after the pinned version (ingested by a step that crashed before
its commit; their connector's checkpoint has already moved past them) are
carried too, in a commit of their own after the pinned rows', so the next step
still finds them as the table's new rows.
"""

from __future__ import annotations

import uuid
from dataclasses import replace

from deltalake import CommitProperties, DeltaTable
from deltalake.schema import Schema
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reconciler.desired.model.table_evolution import Evolution
from reconciler.engine.delta.log import table_uri
from reconciler.engine.delta.storage import COMMIT_TAG, DeltaStorage
from reconciler.engine.runtime import PipelineRuntime, default_value, table_schema
from reconciler.engine.spark.schema import arrow_schema, quoted
from reconciler.engine.spark.session import session_settings
from reconciler.state.program import CommittedTable
from reconciler.state.relations import RelationRecord


def evolve_table(runtime: PipelineRuntime, name: str, evolved: Evolution) -> RelationRecord:
    """Evolve table `name` to its desired columns; returns (and records) its new record."""
    record = runtime.relations[name]
    table = runtime.program.tables[name]
    schema = runtime.table_schemas[name]
    storage, path, pinned = runtime.storage, record.path, record.version
    pending = _pending_files(storage, path, pinned)
    if pending == [] and (evolved.metadata_only or in_the_log(storage, evolved)):
        version = alter_columns(storage, path, schema, evolved)
    else:
        later = _rows_after(runtime, record, pending)
        version = storage.overwrite(path, evolved_rows(runtime.frame(name), table), schema)
        if later is not None:
            version = storage.append(path, evolved_rows(later, table))
    runtime.relations[name] = replace(record, version=version, schema=schema.json(),
                                      rows=storage.row_count(path, version))
    return runtime.relations[name]


def evolved_rows(rows: DataFrame, table: CommittedTable) -> DataFrame:
    """`rows` in `table`'s columns: kept columns cast (widenings cannot fail), dropped ones
    left out, new ones filled with their DEFAULT or NULL."""
    present = set(rows.columns)
    return rows.select(*(
        (F.col(f.name) if f.name in present else default_value(table, f.name))
        .cast(f.dataType).alias(f.name) for f in table_schema(table).fields))


def _pending_files(storage: DeltaStorage, path: str, pinned: int) -> list[str] | None:
    """Data files appended after the pinned version ([] when the table is at it); None when
    the change since is more than appended files (files removed, rows marked deleted)."""
    if storage.latest_version(path) == pinned:
        return []
    if storage.has_change_feed(path):
        return None
    added, removed = storage.changed_files(path, pinned)
    return None if removed else added


def _rows_after(runtime: PipelineRuntime, record: RelationRecord,
                pending: list[str] | None) -> DataFrame | None:
    """Rows the table holds beyond its pinned version, read before the rewrite replaces them
    (checkpointed: the rewrite removes the files they are read from)."""
    old_schema = runtime.schema_of(record)
    if pending == []:
        return None
    if pending is None:  # files were also removed (a compaction): compare the versions
        latest = runtime.storage.latest_version(record.path)
        assert latest is not None
        later = runtime.storage.read(record.path, latest, old_schema).exceptAll(
            runtime.frame_of(record))
    else:
        later = runtime.storage.scan(pending, old_schema)
    return later.localCheckpoint(eager=True)


def in_the_log(storage: DeltaStorage, evolved: Evolution) -> bool:
    """Whether Delta's writer makes this evolution in the log alone: columns dropped, NOT NULL
    dropped, nullable columns added; no value of a row changes."""
    return (storage.writer.evolves_in_the_log and not evolved.widened
            and all(column.get("default") is None for column in evolved.added))


def alter_columns(storage: DeltaStorage, path: str, schema: T.StructType,
                  evolved: Evolution) -> int:
    """Change the table's columns to `schema` in its log alone (`in_the_log`, or only nullable
    columns added on either writer); returns the version. On Delta's writer each `ALTER
    TABLE` is a commit; the manifest, still pinning the version before them, is what
    commits the evolution (a crash between them is redone as a rewrite)."""
    uri = table_uri(path)
    opened = storage.at(uri)
    table, before = opened.table, opened.version
    known = {field.name for field in table.schema().fields}
    if not storage.writer.evolves_in_the_log:
        return add_columns(storage, table, schema, known) if evolved.added else before
    table_sql = f"ALTER TABLE delta.{quoted(uri)}"
    statements = [f"{table_sql} ALTER COLUMN {quoted(name)} DROP NOT NULL"
                  for name in evolved.relaxed]
    if evolved.dropped:
        if not opened.column_mapped:
            statements.append(f"{table_sql} SET TBLPROPERTIES "
                              "('delta.columnMapping.mode' = 'name')")
        statements.append(f"{table_sql} DROP COLUMNS "
                          f"({', '.join(quoted(name) for name in evolved.dropped)})")
    added = ", ".join(f"{quoted(f.name)} {f.dataType.simpleString()}"
                      for f in schema.fields if f.name not in known)
    if added:
        statements.append(f"{table_sql} ADD COLUMNS ({added})")
    for statement in statements:
        tag, previous = uuid.uuid4().hex, storage.latest_version(uri)
        with session_settings(storage.spark,
                              {"spark.databricks.delta.commitInfo.userMetadata": tag}):
            storage.spark.sql(statement)
    return storage.rs_commit_version(uri, tag, previous) if statements else before


def add_columns(storage: DeltaStorage, table: DeltaTable, schema: T.StructType,
                known: set[str]) -> int:
    """delta-rs: the columns of `schema` the table lacks, added in one metadata-only commit."""
    uri, before, tag = table_uri(table.table_uri), table.version(), uuid.uuid4().hex
    added = [field for field in Schema.from_arrow(arrow_schema(schema)).fields
             if field.name not in known]
    table.alter.add_columns(added, commit_properties=CommitProperties(
        custom_metadata={COMMIT_TAG: tag}))
    return storage.rs_commit_version(uri, tag, before)
