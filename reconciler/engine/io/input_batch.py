"""One batch of a `files` input connector: read with the table's columns, appended once.

json and csv are read permissively, keeping each malformed line in a corrupt-record
column: such rows fail the batch naming their files (nothing is appended, the source
does not move on), or with `on_error: quarantine` go to the batch's quarantine folder,
or with `on_bad_input: skip` their files are skipped (`engine.bad_input`). The rows are
appended as the Delta app transaction (connector generation, batch id), so a batch
replayed after a crash writes nothing twice. A `changes: true` connector's rows carry
an `_op` column (`insert` / `delete`, as our outputs write it): its batch is applied
as one change, deletions included, under the same app transaction. Both the
streaming path and the listed path (`engine.listed_ingest`) go through here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pyspark.sql import DataFrame, DataFrameReader
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamReader
from pyspark.sql.types import StringType, StructField, StructType

from reconciler.engine.delta.merge import apply_changes
from reconciler.engine.io.bad_input import (
    FILE_COLUMN,
    BadInput,
    SetAside,
    canonical,
    shown,
    with_file_column,
    write_skipping,
)
from reconciler.engine.maintenance.zset import OP_COLUMN
from reconciler.engine.runtime import PipelineRuntime
from reconciler.state.connectors import ConnectorDefinition, ConnectorState
from reconciler.state.program import CommittedTable
from reconciler.support.errors import ReconcileError

CORRUPT_COLUMN = "_corrupt_record"

Reader = TypeVar("Reader", DataFrameReader, DataStreamReader)


def configured(reader: Reader, connector: ConnectorDefinition, schema: StructType) -> Reader:
    """A (batch or streaming) reader of a files connector: its format and options, the
    table's columns, and for json and csv the corrupt-record column.

    Throughput options (maxFilesPerTrigger, ...) do not count as a modification,
    so the program keeps them apart, but Spark must still get them.
    """
    fmt = connector.format
    # A files connector: reading the program checked it has a format (`connector_shape`).
    assert fmt is not None
    reader = reader.format(fmt).options(**{k: _option(v) for k, v in
                                           connector.reader_options.items()})
    if connector.changes:  # each row says what it does to the table
        schema = StructType([*schema.fields, StructField(OP_COLUMN, StringType(), True)])
    if fmt not in ("json", "csv"):
        return reader.schema(schema)
    permissive = StructType([*(StructField(f.name, f.dataType, True) for f in schema),
                             StructField(CORRUPT_COLUMN, StringType(), True)])
    return (reader.option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT_COLUMN).schema(permissive))


def with_defaults(rows: DataFrame, table: CommittedTable) -> DataFrame:
    """Input rows with the table's DEFAULTs where they hold NULL: a file or source table
    written before a column existed has no value for it (a missing field reads NULL)."""
    defaults = table.defaults
    if not defaults:
        return rows
    return rows.select(*(F.coalesce(F.col(name), F.expr(defaults[name])).alias(name)
                         if name in defaults else F.col(name) for name in rows.columns))


def _option(value: Any) -> str:
    """YAML booleans as Spark spells them (`true`, not Python's `True`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def write_batch(runtime: PipelineRuntime, connector: ConnectorDefinition, frame: DataFrame,
                batch_id: int, *, transaction: str, generation: str,
                set_aside: SetAside | None = None) -> None:
    """Append one micro-batch to its table as app transaction `batch_id` (idempotent).

    Malformed rows fail the batch naming their files (`BadInput`), so Spark neither
    commits it nor moves on; or their files are skipped whole (`set_aside`, given when
    the connector's `on_bad_input` is `skip`); or with `on_error: quarantine` the rows go
    to the quarantine folder of this batch, overwritten when a batch is replayed after a
    crash so that they are never kept twice.
    """
    name, table = connector.name, connector.relation
    quarantine = connector.on_error == "quarantine"
    schema = runtime.table_schemas[table]
    # Cached only when malformed rows are looked for (json, csv): that check and the write
    # are two passes over the batch. A parquet batch is read once, by the write itself.
    checked = CORRUPT_COLUMN in frame.columns
    cached = frame.cache() if checked else frame
    try:
        good = cached
        if checked:
            bad = cached.filter(F.col(CORRUPT_COLUMN).isNotNull())
            bad_rows = bad.count()
            if bad_rows and not quarantine:
                good = _without_bad_files(bad, cached, bad_rows, batch_id, name, set_aside)
            elif bad_rows:
                bad.select(CORRUPT_COLUMN).write.mode("overwrite").text(
                    f"{runtime.layout.quarantine(name)}/batch-{generation}-{batch_id}")
            good = good.filter(F.col(CORRUPT_COLUMN).isNull())
        if connector.changes:
            apply_change_rows(runtime, table, good, batch_id, transaction)
            return
        rows = with_defaults(good.select(*(F.col(f.name).cast(f.dataType) for f in schema)),
                             runtime.program.tables[table])
        runtime.storage.append(runtime.relations[table].path, rows, app_id=transaction,
                               txn_version=batch_id)
    finally:
        if checked:
            cached.unpersist()


def _without_bad_files(bad: DataFrame, rows: DataFrame, bad_rows: int, batch_id: int,
                       name: str, set_aside: SetAside | None) -> DataFrame:
    """`rows` without the files that hold malformed rows, which are set aside; without
    `set_aside`, BadInput naming them. Only file names and counts reach the driver, one
    row per bad file of the batch."""
    per_file = {row[FILE_COLUMN]: row["count"]
                for row in bad.groupBy(FILE_COLUMN).count().collect()}  # (file, count) per bad file
    if set_aside is None:
        files = sorted(canonical(file) for file in per_file)
        raise BadInput(name, f"{bad_rows} malformed row(s) in batch {batch_id} "
                       f"({shown(files)}); fix the input, or set on_error: quarantine or "
                       "on_bad_input: skip", files)
    set_aside({file: f"{count} malformed row(s)" for file, count in per_file.items()})
    return rows.filter(~F.col(FILE_COLUMN).isin(list(per_file)))


def write_checked(runtime: PipelineRuntime, connector: ConnectorDefinition,
                  state: ConnectorState, frame: DataFrame, batch_id: int, transaction: str,
                  files: Callable[[], list[str]]) -> None:
    """Write one batch of a files connector, its bad files failing it or skipped
    (`engine.bad_input`); `files` lists the batch's files, asked only to skip one."""
    schema = runtime.table_schemas[connector.relation]

    def reread(remaining: list[str]) -> DataFrame:
        if not remaining:  # every file skipped: an empty batch still advances the offset
            return frame.limit(0)
        return with_file_column(configured(runtime.spark.read, connector, schema)
                                .load(remaining))

    write_skipping(lambda rows, set_aside: write_batch(
        runtime, connector, rows, batch_id, transaction=transaction,
        generation=state.input_generation, set_aside=set_aside), frame, connector=connector.name,
        policy=connector.on_bad_input, checkpoint=state.input_checkpoint,
        batch_id=batch_id, files=files, reread=reread)


def apply_change_rows(runtime: PipelineRuntime, table: str, rows: DataFrame, batch_id: int,
                      transaction: str) -> None:
    """A `changes: true` batch: rows marked `_op` = insert are added, `_op` = delete remove
    one equal row each (a delete of a row the table does not hold removes nothing). One
    Delta commit, recorded as the batch's app transaction, so a replay changes nothing."""
    schema = runtime.table_schemas[table]
    marked = rows.select(*(F.col(f.name).cast(f.dataType).alias(f.name) for f in schema),
                         F.lower(F.col(OP_COLUMN)).alias(OP_COLUMN)).cache()
    try:
        unknown = marked.filter(~F.coalesce(F.col(OP_COLUMN).isin("insert", "delete"),
                                            F.lit(False))).count()
        if unknown:
            raise ReconcileError(f"{unknown} row(s) in batch {batch_id} with {OP_COLUMN} "
                                 "neither 'insert' nor 'delete'")
        names = [column for column in marked.columns if column != OP_COLUMN]
        inserts = with_defaults(marked.filter(F.col(OP_COLUMN) == "insert").select(*names),
                                runtime.program.tables[table])
        deletes = with_defaults(marked.filter(F.col(OP_COLUMN) == "delete").select(*names),
                                runtime.program.tables[table])
        record = runtime.relations[table]
        latest = runtime.storage.latest_version(record.path)
        assert latest is not None
        apply_changes(runtime.storage, record.path, latest, schema, inserts,
            None if deletes.isEmpty() else deletes.localCheckpoint(eager=True),
            app_transaction=(transaction, batch_id),
            distinct=bool(runtime.program.tables[table].primary_key))
    finally:
        marked.unpersist()
