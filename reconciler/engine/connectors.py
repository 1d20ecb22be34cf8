"""Input and output connectors.

Inputs are Spark Structured Streaming sources run with `trigger(availableNow=True)`:
the streaming checkpoint is the connector's offset state, and every micro-batch is
appended to its table as a Delta app transaction (app id = connector generation,
version = batch id), so replaying a batch after a crash writes nothing twice.

Outputs receive a view's changes each step (rows with an `_op` column, `insert` or
`delete`), or the view's full contents when it is bootstrapped. File names are
derived from the manifest serial, so re-running a step that crashed overwrites
the same file instead of emitting it twice.
"""

from __future__ import annotations

import glob
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from reconciler.engine.delta_source import ingest_delta
from reconciler.engine.runtime import PipelineRuntime, table_schema, with_defaults
from reconciler.engine.session import is_connect
from reconciler.errors import ReconcileError
from reconciler.layout import resolve_path

CORRUPT_COLUMN = "_corrupt_record"


@dataclass(frozen=True)
class IngestResult:
    connector: str
    table: str
    batches: int


def outputs_by_relation(program: dict[str, Any]) -> dict[str, list[str]]:
    """Output connector names grouped by the table or view they send."""
    outputs: dict[str, list[str]] = {}
    for name, definition in program["connectors"].items():
        if definition["direction"] == "output":
            outputs.setdefault(definition["relation"], []).append(name)
    return outputs


def app_id(pipeline: str, connector: str, generation: str) -> str:
    return f"reconcile:{pipeline}:{connector}:{generation}"


def _local(path: str) -> str | None:
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return unquote(parsed.path) if parsed.scheme else path
    return None


def _seen_files(checkpoint: str) -> set[str]:
    """Files a file-source stream has already taken, from its checkpoint's source log."""
    log_dir = Path(checkpoint) / "sources" / "0"
    seen: set[str] = set()
    if not log_dir.is_dir():
        return seen
    for entry in log_dir.iterdir():
        if entry.name.startswith("."):
            continue
        for line in entry.read_text(encoding="utf-8").splitlines()[1:]:
            if line.strip():
                seen.add(os.path.realpath(_local(json.loads(line)["path"]) or ""))
    return seen


def _pending_batch(checkpoint: str) -> bool:
    """Whether the stream planned a batch it never committed (a failed or killed run).

    Spark writes `offsets/N` before running batch N and `commits/N` after it; the
    files of such a batch are already in the source log, so only this tells that a
    restart has work to redo.
    """
    def batch_ids(kind: str) -> set[str]:
        folder = Path(checkpoint) / kind
        if not folder.is_dir():
            return set()
        return {entry.name for entry in folder.iterdir() if entry.name.isdigit()}

    return bool(batch_ids("offsets") - batch_ids("commits"))


def _hidden(name: str) -> bool:
    """Names Spark's file index skips: `.x`, `_x` (but not `_k=v` partitions), `x._COPYING_`."""
    return (name.startswith(".") or (name.startswith("_") and "=" not in name)
            or name.endswith("._COPYING_"))


def _input_files(path: str) -> set[str]:
    """The files Spark's file index would list for a local `path`.

    Like Spark, `path` may be a glob, and folders are listed recursively (partition
    folders such as `day=2025-01-01/`), skipping hidden names.
    """
    roots = sorted(glob.glob(path)) if glob.has_magic(path) else [path]
    files: set[str] = set()
    for root in roots:
        if os.path.isfile(root):
            files.add(os.path.realpath(root))
            continue
        for folder, subfolders, names in os.walk(root):
            subfolders[:] = [name for name in subfolders if not _hidden(name)]
            files.update(os.path.realpath(os.path.join(folder, name)) for name in names
                         if not _hidden(name))
    return files


def has_new_files(path: str, checkpoint: str) -> bool:
    """Whether a files source has input its checkpoint has not taken, without a Spark job.

    Only local paths can be listed here; for other file systems Spark decides.
    """
    local_path = _local(path)
    local_checkpoint = _local(checkpoint)
    if local_path is None or local_checkpoint is None:
        return True
    if _pending_batch(local_checkpoint):
        return True
    return bool(_input_files(local_path) - _seen_files(local_checkpoint))


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else ""


def _source(runtime: PipelineRuntime, definition: dict[str, Any], schema: StructType,
            path: str) -> DataFrame:
    """The streaming read of a files connector; json and csv keep malformed rows aside.

    Throughput options (maxFilesPerTrigger, ...) do not count as a modification,
    so the program keeps them apart, but Spark must still get them.
    """
    fmt = definition["format"]
    options = {**definition["options"], **definition.get("throughput_options", {})}
    reader = runtime.spark.readStream.format(fmt).options(**{
        k: _option(v) for k, v in options.items()})
    if fmt not in ("json", "csv"):
        return reader.schema(schema).load(path)
    permissive = StructType([*(StructField(f.name, f.dataType, True) for f in schema),
                             StructField(CORRUPT_COLUMN, StringType(), True)])
    return (reader.option("mode", "PERMISSIVE")
            .option("columnNameOfCorruptRecord", CORRUPT_COLUMN)
            .schema(permissive).load(path))


def _option(value: Any) -> str:
    """YAML booleans as Spark spells them (`true`, not Python's `True`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def ingest(runtime: PipelineRuntime, name: str, definition: dict[str, Any],
           state: dict[str, Any], base_dir: Path) -> IngestResult | None:
    """Run one input connector to the end of its available input; None if nothing new.

    `state` is the connector's state for the next manifest (updated in place).
    """
    transaction = app_id(runtime.layout.pipeline, name, state["generation"])
    if definition["type"] == "delta":
        version = ingest_delta(runtime, name, definition, state, base_dir, transaction)
        return None if version is None else IngestResult(name, definition["relation"], 1)
    path = resolve_path(definition["path"], base_dir)
    if not has_new_files(path, state["checkpoint"]):
        return None
    if is_connect(runtime.spark):
        # foreachBatch over Spark Connect runs its function on the server, which cannot
        # carry this process's runtime; until ingest is server-side, say so in one line.
        raise ReconcileError(f"connector '{name}': files connectors do not run over Spark "
                             "Connect yet; run this step with --spark-master (a cluster or "
                             "embedded Spark)")
    table = definition["relation"]
    schema = table_schema(runtime.program["tables"][table])
    table_path = runtime.relations[table]["path"]
    quarantine = definition["on_error"] == "quarantine"
    batches: list[int] = []
    # Why a batch failed, kept here rather than fished out of the
    # StreamingQueryException text (which also holds a Python traceback).
    failures: list[str] = []

    def write_batch(frame: DataFrame, batch_id: int) -> None:
        try:
            _write_batch(runtime, name, frame, batch_id, table=table, schema=schema,
                         table_path=table_path,
                         transaction=transaction, quarantine=quarantine,
                         generation=state["generation"])
        except Exception as error:
            failures.append(_describe(error))
            raise
        batches.append(batch_id)

    with _quiet_stream_failure(runtime.spark):
        query = (_source(runtime, definition, schema, path).writeStream
                 .foreachBatch(write_batch)
                 .option("checkpointLocation", state["checkpoint"])
                 .trigger(availableNow=True).start())
        try:
            query.awaitTermination()
        except StreamingQueryException as error:
            detail = failures[-1] if failures else _first_line(str(error))
            raise ReconcileError(f"input connector '{name}' ({path}): {detail}") from error
    return IngestResult(connector=name, table=table, batches=len(batches))


def _describe(error: Exception) -> str:
    """One line for a batch's failure: our own errors as they are, others with their type."""
    if isinstance(error, ReconcileError):
        return str(error)
    return f"{type(error).__name__}: {_first_line(str(error))}"


STREAM_LOGGER = "org.apache.spark.sql.execution.streaming"
PY4J_LOGGER = "py4j.clientserver"


@contextmanager
def _quiet_stream_failure(spark: Any) -> Iterator[None]:
    """Silence the two tracebacks a failing batch logs, for the span of one query.

    Spark logs the terminated query at ERROR with the Java stack, and py4j logs
    the Python callback's exception; on a terminal that is dozens of lines before
    the one-line error the CLI prints. The failure is not lost: it is raised as a
    ReconcileError, chained to Spark's exception (shown with `--debug`).
    """
    py4j_logger = logging.getLogger(PY4J_LOGGER)
    py4j_level = py4j_logger.level
    py4j_logger.setLevel(logging.CRITICAL)
    restore = _mute_jvm_logger(spark, STREAM_LOGGER)
    try:
        yield
    finally:
        py4j_logger.setLevel(py4j_level)
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


def _write_batch(runtime: PipelineRuntime, name: str, frame: DataFrame, batch_id: int, *,
                 table: str, schema: StructType, table_path: str, transaction: str,
                 quarantine: bool,
                 generation: str) -> None:
    """Append one micro-batch to its table as app transaction `batch_id` (idempotent).

    Malformed rows fail the batch, so Spark neither commits it nor moves on, or
    go to the quarantine folder of this batch, overwritten when a batch is
    replayed after a crash so that they are never kept twice.
    """
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
                raise ReconcileError(f"{bad_rows} malformed row(s) in batch {batch_id}; "
                                     "fix the input or set on_error: quarantine")
            if bad_rows:
                bad.select(CORRUPT_COLUMN).write.mode("overwrite").text(
                    f"{runtime.layout.quarantine(name)}/batch-{generation}-{batch_id}")
            good = cached.filter(F.col(CORRUPT_COLUMN).isNull())
        rows = with_defaults(good.select(*(F.col(f.name).cast(f.dataType) for f in schema)),
                             runtime.program["tables"][table])
        runtime.storage.append(table_path, rows, app_id=transaction, txn_version=batch_id)
    finally:
        if checked:
            cached.unpersist()


def emit(runtime: PipelineRuntime, name: str, definition: dict[str, Any], changes: DataFrame,
         serial: int, base_dir: Path, snapshot: bool) -> int:
    """Send a view's changes (or, when `snapshot`, its full contents) to one output connector."""
    path = resolve_path(definition["path"], base_dir)
    if definition["type"] == "delta":
        view = definition["relation"]
        contents = runtime.frame(view)
        runtime.storage.overwrite(path, contents, contents.schema)
        return runtime.storage.row_count(path, runtime.storage.latest_version(path) or 0)
    kind = "snapshot" if snapshot else "changes"
    name_in_folder = f"{serial:010d}-{kind}.{definition['format']}"
    # Spark writes the file (one task, as the file is one by contract), never the driver.
    changes = changes.cache()
    try:
        rows = changes.count()
        if not rows and not snapshot:
            return 0
        writer = changes.coalesce(1).write.mode("overwrite").format(definition["format"])
        if definition["format"] == "csv":
            writer = writer.option("header", "true")
        elif definition["format"] == "json":
            writer = writer.option("ignoreNullFields", "false")
        folder = _local(path)
        if folder is None:  # object storage: the folder `name_in_folder` holds one part file
            writer.save(f"{path.rstrip('/')}/{name_in_folder}")
            return rows
        staging = os.path.join(folder, f".{serial:010d}-{kind}.tmp")
        writer.save(staging)
        [part] = glob.glob(os.path.join(glob.escape(staging), "part-*"))
        os.replace(part, os.path.join(folder, name_in_folder))  # a retried step overwrites
        shutil.rmtree(staging, ignore_errors=True)
        return rows
    finally:
        changes.unpersist()
