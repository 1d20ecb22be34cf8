"""Input and output connectors.

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
exactly-once rule. Delta and Kafka inputs are bounded batch reads too
(`engine.io.delta_source`, `engine.io.kafka_source`).

Outputs receive a view's changes each step (rows with an `_op` column, `insert` or
`delete`), or the view's full contents when it is bootstrapped. File names are
derived from the manifest serial, so re-running a step that crashed overwrites
the same file instead of emitting it twice.
"""

from __future__ import annotations

import glob
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame

from reconciler.engine.io.delta_source import ingest_delta
from reconciler.engine.io.input_batch import (
    BadInput,
    configured,
    note_skipped,
    stream_batch_files,
    with_file_column,
    write_checked,
)
from reconciler.engine.io.input_files import CheckpointLog, has_new_files
from reconciler.engine.io.kafka_sink import send
from reconciler.engine.io.kafka_source import ingest_kafka
from reconciler.engine.io.listed_ingest import ingest_listed, uses_listed_batches
from reconciler.engine.runtime import PipelineRuntime
from reconciler.engine.spark.session import is_connect
from reconciler.state.connectors import ConnectorDefinition, ConnectorState
from reconciler.support.errors import ReconcileError


@dataclass(frozen=True)
class IngestResult:
    connector: str
    table: str
    batches: int


def outputs_by_relation(connectors: dict[str, ConnectorDefinition]) -> dict[str, list[str]]:
    """Output connector names grouped by the table or view they send."""
    outputs: dict[str, list[str]] = {}
    for name, connector in connectors.items():
        if not connector.is_input:
            outputs.setdefault(connector.relation, []).append(name)
    return outputs


def app_id(pipeline: str, connector: str, generation: str) -> str:
    return f"reconcile:{pipeline}:{connector}:{generation}"


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


def ingest(runtime: PipelineRuntime, connector: ConnectorDefinition, state: ConnectorState
           ) -> IngestResult | None:
    """Run one input connector to the end of its available input; None if nothing new.

    `state` is the connector's state for the next manifest (advanced in place).
    """
    checkpoint = state.input_checkpoint
    transaction = app_id(runtime.layout.pipeline, connector.name, state.input_generation)
    if connector.type == "delta":
        version = ingest_delta(runtime, connector, state, transaction)
        return None if version is None else IngestResult(connector.name, connector.relation, 1)
    if connector.type == "kafka":
        with _quiet_stream_failure(runtime.spark):  # a malformed message fails a task
            batch = ingest_kafka(runtime, connector, state, transaction)
        return None if batch is None else IngestResult(connector.name, connector.relation, 1)
    log = CheckpointLog.read(checkpoint)  # one listing, for both questions and the batches
    if not has_new_files(connector.location, checkpoint, log):
        return None
    with _quiet_stream_failure(runtime.spark):
        try:
            if uses_listed_batches(connector, checkpoint, is_connect(runtime.spark), log):
                batches = ingest_listed(runtime, connector, state, transaction, log)
            else:
                batches = _ingest_streamed(runtime, connector, state, transaction)
        finally:
            note_skipped(state)
    return IngestResult(connector.name, connector.relation, batches) if batches else None


def _ingest_streamed(runtime: PipelineRuntime, connector: ConnectorDefinition,
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


STREAM_LOGGER = "org.apache.spark.sql.execution.streaming"
TASK_FAILURE_LOGGERS = (STREAM_LOGGER, "org.apache.spark.executor.Executor",
                        "org.apache.spark.scheduler.TaskSetManager",
                        "org.apache.spark.sql.execution.datasources.FileFormatWriter",
                        "org.apache.spark.util.Utils")
PY4J_LOGGER = "py4j.clientserver"


@contextmanager
def _quiet_stream_failure(spark: Any) -> Iterator[None]:
    """Silence what a failing batch logs, for the span of one connector's ingestion.

    Spark logs the terminated query at ERROR with the Java stack, each failed task
    and aborted write once more, and py4j the Python callback's exception; on a
    terminal that is dozens of lines before the one-line error the CLI prints (a bad
    input file names itself in that line). The failure is not lost: it is raised as
    a ReconcileError, chained to Spark's exception (shown with `--debug`).
    """
    py4j_logger = logging.getLogger(PY4J_LOGGER)
    py4j_level = py4j_logger.level
    py4j_logger.setLevel(logging.CRITICAL)
    restores = [_mute_jvm_logger(spark, name) for name in TASK_FAILURE_LOGGERS]
    try:
        yield
    finally:
        py4j_logger.setLevel(py4j_level)
        for restore in reversed(restores):
            restore()


def _mute_jvm_logger(spark: Any, name: str) -> Callable[[], None]:
    """Turn a log4j2 logger off in the driver's JVM; returns how to restore it.

    No-op where there is no driver JVM here (Spark Connect) or no log4j2 core.
    """
    try:
        log4j = spark._jvm.org.apache.logging.log4j
        configurator = log4j.core.config.Configurator
        previous = log4j.LogManager.getLogger(name).getLevel()
        configurator.setLevel(name, log4j.Level.OFF)
    except Exception:  # no JVM (Connect), or another logging backend
        return lambda: None
    return lambda: configurator.setLevel(name, previous)


def emit(runtime: PipelineRuntime, connector: ConnectorDefinition, changes: DataFrame,
         serial: int, snapshot: bool, rows: int | None = None) -> int:
    """Send a view's changes (or, when `snapshot`, its full contents) to one output connector.
    `rows`: how many `changes` holds, when the step counted them as it computed them
    (`ZSet.net`); a files connector then writes them without counting them first."""
    path = connector.location
    if connector.type == "kafka":
        return send(runtime, connector, changes, serial, snapshot)
    if connector.type == "delta":
        contents = runtime.frame(connector.relation)
        if runtime.storage.latest_version(path) is None:  # readers of all ages open it
            runtime.storage.create(path, contents.schema, deletion_vectors=False)
        version = runtime.storage.overwrite(path, contents, contents.schema)
        return runtime.storage.row_count(path, version)
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
