"""`reconcile execute`'s statements on a table: an INSERT's rows appended once, a DELETE's
rows removed, each through the relation it writes (`delta.relation`), before the step
that carries the change through every view (`operations.statements`)."""

from __future__ import annotations

from pyspark.sql import functions as F

from reconciler.desired.analysis.query_parts import relations_named
from reconciler.engine.delta.relation import DeltaRelation
from reconciler.engine.runtime import PipelineRuntime, default_value
from reconciler.engine.spark.checkpoints import unless_empty
from reconciler.support.errors import ReconcileError


def insert_rows(runtime: PipelineRuntime, table: str, source_sql: str,
                columns: list[str] | None, *, app_id: str, txn_version: int) -> None:
    """Append the rows of `source_sql` (an INSERT's VALUES or SELECT) to `table`.

    The rows are cast to the table's declared schema (columns not named get their DEFAULT
    or NULL) and appended as the Delta app transaction (`app_id`, `txn_version`), so a
    retried insert is written once.
    """
    runtime.register_queryable(relations_named(source_sql))
    source = runtime.spark.sql(source_sql)
    definition = runtime.program.tables[table]
    schema = runtime.table_schemas[table]
    names = columns or [f.name for f in schema]
    if len(source.columns) != len(names):
        raise ReconcileError(f"INSERT INTO {table}: {len(source.columns)} values for "
                             f"{len(names)} columns")
    renamed = source.toDF(*names)
    rows = renamed.select(*(
        (F.col(f.name) if f.name in names else default_value(definition, f.name))
        .cast(f.dataType).alias(f.name) for f in schema))
    runtime.storage.append(runtime.relations[table].path, rows, app_id=app_id,
                           txn_version=txn_version)


def delete_rows(runtime: PipelineRuntime, table: str, condition_sql: str) -> None:
    """Remove the rows of `table` where `condition_sql` holds (other relations may appear
    in subqueries, at their pinned versions).

    It applies to the table's latest version: rows ingested by a step that never committed
    are still there to be deleted (their connector has moved past them). The rows to
    delete are checkpointed first, since the rewrite replaces the files they are read
    from."""
    record = runtime.relations[table]
    latest = runtime.storage.latest_version(record.path)
    assert latest is not None
    relation = DeltaRelation(runtime.storage, record.path, latest, runtime.schema_of(record))
    doomed_sql = f"SELECT * FROM `{table}` WHERE {condition_sql}"
    runtime.register_queryable(relations_named(doomed_sql) - {table})  # the table: latest
    relation.frame().createOrReplaceTempView(table)
    doomed = unless_empty(runtime.spark.sql(doomed_sql))
    if doomed is not None:  # else no commit, so the step sees no change
        relation.apply_changes(None, doomed,
                               distinct=bool(runtime.program.tables[table].primary_key))
