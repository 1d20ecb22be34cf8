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

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from reconciler.errors import ReconcileError
from reconciler.runtime import PipelineRuntime, table_schema

CORRUPT_COLUMN = "_corrupt_record"
OP_COLUMN = "_op"


@dataclass(frozen=True)
class IngestResult:
    connector: str
    table: str
    batches: int


def resolve_path(path: str, base_dir: Path) -> str:
    """Connector paths are relative to the project folder unless absolute or a URI."""
    if "://" in path or os.path.isabs(path):
        return path
    return str((base_dir / path).resolve())


def app_id(pipeline: str, connector: str, generation: int) -> str:
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


def has_new_files(path: str, checkpoint: str) -> bool:
    """Whether a files source has input its checkpoint has not seen, without a Spark job.

    Only local folders can be listed here; for other file systems Spark decides.
    """
    folder = _local(path)
    local_checkpoint = _local(checkpoint)
    if folder is None or local_checkpoint is None:
        return True
    if not os.path.isdir(folder):
        return False
    present = {os.path.realpath(os.path.join(folder, name)) for name in os.listdir(folder)
               if not name.startswith((".", "_"))
               and os.path.isfile(os.path.join(folder, name))}
    return bool(present - _seen_files(local_checkpoint))


def ingest(runtime: PipelineRuntime, name: str, definition: dict[str, Any],
           state: dict[str, Any], base_dir: Path) -> IngestResult | None:
    """Run one input connector to the end of its available input; None if nothing new."""
    if definition["type"] != "files":
        raise ReconcileError(f"input connector '{name}': type '{definition['type']}' is not "
                             "supported by this engine yet (use 'files')")
    path = resolve_path(definition["path"], base_dir)
    if not has_new_files(path, state["checkpoint"]):
        return None
    table = definition["relation"]
    schema = table_schema(runtime.program["tables"][table])
    fmt = definition["format"]
    reader = runtime.spark.readStream.format(fmt).options(**{
        k: str(v) for k, v in definition["options"].items()})
    reader_schema = schema
    if fmt in ("json", "csv"):
        reader_schema = StructType([*(StructField(f.name, f.dataType, True) for f in schema),
                                    StructField(CORRUPT_COLUMN, StringType(), True)])
        reader = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord",
                                                            CORRUPT_COLUMN)
    table_path = runtime.relations[table]["path"]
    transaction = app_id(runtime.layout.pipeline, name, state["generation"])
    batches: list[int] = []

    def write_batch(frame: DataFrame, batch_id: int) -> None:
        frame = frame.cache()
        if CORRUPT_COLUMN in frame.columns:
            bad = frame.filter(F.col(CORRUPT_COLUMN).isNotNull())
            bad_rows = bad.count()
            if bad_rows and definition["on_error"] != "quarantine":
                raise ValueError(f"RECONCILE: {bad_rows} malformed row(s) in batch {batch_id}; "
                                 "fix the input or set on_error: quarantine")
            if bad_rows:
                bad.select(CORRUPT_COLUMN).write.mode("append").text(
                    runtime.layout.quarantine(name) + f"/batch-{state['generation']}-{batch_id}")
            frame = frame.filter(F.col(CORRUPT_COLUMN).isNull())
        rows = frame.select(*(F.col(f.name).cast(f.dataType) for f in schema))
        runtime.storage.append(table_path, rows, app_id=transaction, txn_version=batch_id)
        frame.unpersist()
        batches.append(batch_id)

    query = (reader.schema(reader_schema).load(path).writeStream.foreachBatch(write_batch)
             .option("checkpointLocation", state["checkpoint"])
             .trigger(availableNow=True).start())
    try:
        query.awaitTermination()
    except StreamingQueryException as error:
        message = str(error)
        detail = message.split("RECONCILE: ", 1)[1].split("\n", 1)[0] if "RECONCILE: " in message \
            else message.splitlines()[0]
        raise ReconcileError(f"input connector '{name}' ({path}): {detail}") from None
    return IngestResult(connector=name, table=table, batches=len(batches))


def emit(runtime: PipelineRuntime, name: str, definition: dict[str, Any], changes: DataFrame,
         serial: int, base_dir: Path, snapshot: bool) -> int:
    """Send a view's changes (or, when `snapshot`, its full contents) to one output connector."""
    path = resolve_path(definition["path"], base_dir)
    if definition["type"] == "delta":
        view = definition["relation"]
        contents = runtime.frame(view)
        runtime.storage.overwrite(path, contents, contents.schema)
        return runtime.storage.row_count(path, runtime.storage.latest_version(path) or 0)
    table = changes.toArrow()
    if table.num_rows == 0 and not snapshot:
        return 0
    folder = _local(path)
    if folder is None:
        changes.coalesce(1).write.mode("overwrite").format(definition["format"]).save(
            f"{path}/{serial:010d}-{name}")
        return table.num_rows
    os.makedirs(folder, exist_ok=True)
    kind = "snapshot" if snapshot else "changes"
    target = os.path.join(folder, f"{serial:010d}-{kind}.{definition['format']}")
    temporary = os.path.join(folder, f".{serial:010d}.tmp")
    _write_arrow(table, definition["format"], temporary)
    os.replace(temporary, target)
    return table.num_rows


def _write_arrow(table: Any, fmt: str, path: str) -> None:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        pq.write_table(table, path)
    elif fmt == "csv":
        import pyarrow.csv as pacsv

        pacsv.write_csv(table, path)
    else:
        with open(path, "w", encoding="utf-8") as handle:
            for row in table.to_pylist():
                handle.write(json.dumps(row, default=str, sort_keys=False) + "\n")


def changes_between(old: DataFrame | None, new: DataFrame) -> DataFrame:
    """Rows to delete and insert to turn `old` into `new`, marked in the `_op` column."""
    inserts = new.withColumn(OP_COLUMN, F.lit("insert"))
    if old is None:
        return inserts
    deletes = old.exceptAll(new).withColumn(OP_COLUMN, F.lit("delete"))
    return deletes.unionByName(new.exceptAll(old).withColumn(OP_COLUMN, F.lit("insert")))
