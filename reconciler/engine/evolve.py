"""Carry a table's rows to its new columns in place (`spec.evolution` says whether and how).

A nullable column added at the end is one metadata-only Delta commit (existing
rows read NULL: no data file is read or written). Anything else that evolves —
widenings, dropped columns, a DEFAULT to fill, NOT NULL dropped — is a rewrite by
Spark with a cast, which cannot fail or lose a value.

Rows appended after the pinned version (ingested by a step that crashed before
its commit; their connector's checkpoint has already moved past them) are
carried too, in a commit of their own after the pinned rows', so the next step
still finds them as the table's new rows.
"""

from __future__ import annotations

import uuid
from typing import Any

from deltalake import CommitProperties
from deltalake.schema import Schema
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reconciler.engine.merge import quoted
from reconciler.engine.runtime import PipelineRuntime, default_value, table_schema
from reconciler.engine.schema import arrow_schema, struct_from_json
from reconciler.engine.session import session_settings
from reconciler.engine.storage import COMMIT_TAG, DeltaStorage, table_uri
from reconciler.spec.evolution import Evolution


def evolve_table(runtime: PipelineRuntime, name: str, evolved: Evolution) -> dict[str, Any]:
    """Evolve table `name` to its desired columns; returns (and records) its new state."""
    state = runtime.relations[name]
    table = runtime.program["tables"][name]
    schema = table_schema(table)
    storage, path, pinned = runtime.storage, state["path"], state["version"]
    pending = _pending_files(storage, path, pinned)
    if evolved.metadata_only and pending == []:
        version = add_columns(storage, path, schema) if evolved.added else pinned
    else:
        later = _rows_after(runtime, state, pending)
        version = storage.overwrite(path, evolved_rows(runtime.frame(name), table), schema)
        if later is not None:
            version = storage.append(path, evolved_rows(later, table))
    runtime.relations[name] = {**state, "version": version, "schema": schema.json(),
                               "rows": storage.row_count(path, version)}
    return runtime.relations[name]


def evolved_rows(rows: DataFrame, table: dict[str, Any]) -> DataFrame:
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


def _rows_after(runtime: PipelineRuntime, state: dict[str, Any],
                pending: list[str] | None) -> DataFrame | None:
    """Rows the table holds beyond its pinned version, read before the rewrite replaces them
    (checkpointed: the rewrite removes the files they are read from)."""
    old_schema = struct_from_json(state["schema"])
    if pending == []:
        return None
    if pending is None:  # files were also removed (a compaction): compare the versions
        latest = runtime.storage.latest_version(state["path"])
        assert latest is not None
        later = runtime.storage.read(state["path"], latest, old_schema).exceptAll(
            runtime.frame_of(state))
    else:
        later = runtime.storage.scan(pending, old_schema)
    return later.localCheckpoint(eager=True)


def add_columns(storage: DeltaStorage, path: str, schema: T.StructType) -> int:
    """Evolve the table's schema to `schema`, whose extra fields are new nullable columns at
    the end: one metadata-only commit (Delta's `ALTER TABLE ADD COLUMNS`, or delta-rs's)."""
    uri = table_uri(path)
    table = storage.require(uri)
    before = table.version()
    known = {field.name for field in table.schema().fields}
    tag = uuid.uuid4().hex
    if storage.writer == "delta-spark":
        columns = ", ".join(f"{quoted(f.name)} {f.dataType.simpleString()}"
                            for f in schema.fields if f.name not in known)
        with session_settings(storage.spark,
                              {"spark.databricks.delta.commitInfo.userMetadata": tag}):
            storage.spark.sql(f"ALTER TABLE delta.{quoted(uri)} ADD COLUMNS ({columns})")
        return storage.rs_commit_version(uri, tag, before)
    added = [field for field in Schema.from_arrow(arrow_schema(schema)).fields
             if field.name not in known]
    table.alter.add_columns(added, commit_properties=CommitProperties(
        custom_metadata={COMMIT_TAG: tag}))
    return storage.rs_commit_version(uri, tag, before)
