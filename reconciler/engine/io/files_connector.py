"""The `files` connector: an input folder read as bounded batches, an output folder that
receives one file per step.

A `files` input on a local (or mounted) path or on S3 (`s3a://`) is read as bounded
batches: the client lists the files its checkpoint has not taken, records them, and
Spark reads exactly those as a batch DataFrame, blindly appended to the table as a Delta
app transaction (app id = connector generation, version = batch id), so replaying a
batch after a crash writes nothing twice (`engine.io.listed_ingest`); no streaming query
is started per step. A connector with options only the stream implements
(`cleanSource`, ...), one whose input or checkpoint is on a file system the client
cannot list (`gs://`, `hdfs://`, ...), or one whose stream left a batch unfinished, is a
Spark Structured Streaming source run with `trigger(availableNow=True)`: its streaming
checkpoint is its offset state, and every micro-batch is appended under the same
exactly-once rule.

An output receives a view's changes each step (rows with an `_op` column, `insert` or
`delete`), or the view's full contents when it is bootstrapped, as one file whose name is
derived from the manifest serial, so re-running a step that crashed overwrites the same
file instead of emitting it twice.
"""

from __future__ import annotations

import glob
import os
import shutil

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame

from reconciler.engine.io.input_batch import (
    BadInput,
    configured,
    note_skipped,
    stream_batch_files,
    with_file_column,
    write_checked,
)
from reconciler.engine.io.input_files import CheckpointLog, has_new_files
from reconciler.engine.io.listed_ingest import ingest_listed, uses_listed_batches
from reconciler.engine.io.stream_logs import quiet_stream_failure
from reconciler.engine.runtime import PipelineRuntime
from reconciler.engine.spark.session import is_connect
from reconciler.state.connectors import ConnectorDefinition, ConnectorState
from reconciler.support.errors import ReconcileError


def ingest_files(runtime: PipelineRuntime, connector: ConnectorDefinition,
                 state: ConnectorState, transaction: str) -> int:
    """The folder's files no batch took, landed in the connector's table; how many batches
    (0: nothing new, decided from one listing of the checkpoint, without Spark)."""
    checkpoint = state.input_checkpoint
    log = CheckpointLog.read(checkpoint)  # one listing, for both questions and the batches
    if not has_new_files(connector.location, checkpoint, log):
        return 0
    with quiet_stream_failure(runtime.spark):
        try:
            if uses_listed_batches(connector, checkpoint, is_connect(runtime.spark), log):
                return ingest_listed(runtime, connector, state, transaction, log)
            return ingest_streamed(runtime, connector, state, transaction)
        finally:
            note_skipped(state)


def ingest_streamed(runtime: PipelineRuntime, connector: ConnectorDefinition,
                     state: ConnectorState, transaction: str) -> int:
    """A files connector as a Structured Streaming query; returns how many batches ran.

    Only where the listed path cannot go (`uses_listed_batches`): an input or checkpoint
    on a file system the client cannot list (neither local nor S3), a stream-only option,
    or a stream batch an earlier run left unfinished, which Spark redoes with its files
    once."""
    batches: list[int] = []
    # Why a batch failed, kept here rather than fished out of the
    # StreamingQueryException text (which also holds a Python traceback).
    failures: list[Exception] = []
    schema = runtime.table_schemas[connector.relation]

    def each_batch(frame: DataFrame, batch_id: int) -> None:
        try:
            write_checked(runtime, connector, state, frame, batch_id, transaction,
                          files=lambda: stream_batch_files(state.input_checkpoint, batch_id))
        except Exception as error:
            failures.append(error)
            raise
        batches.append(batch_id)

    stream = configured(runtime.spark.readStream, connector, schema).load(connector.location)
    query = (with_file_column(stream).writeStream
             .foreachBatch(each_batch)
             .option("checkpointLocation", state.input_checkpoint)
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination()
    except StreamingQueryException as error:
        failure = failures[-1] if failures else None
        where = f"input connector '{connector.name}' ({connector.path})"
        if isinstance(failure, BadInput):
            raise BadInput(connector.name, f"{where}: {failure.message}",
                           failure.files) from error
        detail = _describe(failure) if failure else _first_line(str(error))
        raise ReconcileError(f"{where}: {detail}") from error
    return len(batches)


def _describe(error: Exception) -> str:
    """One line for a batch's failure: our own errors as they are, others with their type."""
    if isinstance(error, ReconcileError):
        return str(error)
    return f"{type(error).__name__}: {_first_line(str(error))}"


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


def send_files(connector: ConnectorDefinition, changes: DataFrame, serial: int,
               snapshot: bool, rows: int | None) -> int:
    """Write a view's changes (or its snapshot) as one file; `rows`: how many `changes`
    holds, when the step counted them already (else they are counted, computed once)."""
    if rows is not None:
        return _write_file(connector, changes, rows, serial, snapshot)
    changes = changes.cache()  # counted, then written: computed once
    try:
        return _write_file(connector, changes, changes.count(), serial, snapshot)
    finally:
        changes.unpersist()


def _write_file(connector: ConnectorDefinition, changes: DataFrame, rows: int, serial: int,
                snapshot: bool) -> int:
    """Write `rows` rows of changes (or a snapshot) as one file in a files connector's folder."""
    if not rows and not snapshot:
        return 0
    # Reading the program checked it has a format (`connector_shape`).
    assert connector.format is not None
    kind = "snapshot" if snapshot else "changes"
    name_in_folder = f"{serial:010d}-{kind}.{connector.format}"
    # Spark writes the file (one task, as the file is one by contract), never the driver.
    writer = changes.coalesce(1).write.mode("overwrite").format(connector.format)
    if connector.format == "csv":
        writer = writer.option("header", "true")
    elif connector.format == "json":
        writer = writer.option("ignoreNullFields", "false")
    folder = connector.local_location
    if folder is None:  # object storage: the folder `name_in_folder` holds one part file
        writer.save(f"{connector.location.rstrip('/')}/{name_in_folder}")
        return rows
    staging = os.path.join(folder, f".{serial:010d}-{kind}.tmp")
    writer.save(staging)
    [part] = glob.glob(os.path.join(glob.escape(staging), "part-*"))
    os.replace(part, os.path.join(folder, name_in_folder))  # a retried step overwrites
    shutil.rmtree(staging, ignore_errors=True)
    return rows
