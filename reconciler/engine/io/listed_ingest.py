"""A `files` input connector without Structured Streaming: the client lists, Spark reads.

Over Spark Connect a stream's `foreachBatch` function runs on the server, which
cannot carry this process's runtime (its storage writer commits with delta-rs
from here). So the client does the file source's bookkeeping itself, in the
connector's checkpoint folder, and Spark reads each batch's files as a batch
DataFrame on the cluster:

1. `listed/N.json` records the files of batch N before anything is read
   (Structured Streaming's `offsets/N`);
2. the rows are appended as the Delta app transaction (connector generation, N),
   so a batch redone after a crash lands once (`engine.input_batch`);
3. `listed/N.done` marks it finished (`commits/N`).

A batch with a `.json` and no `.done` is redone with exactly its files first.
New files are those the local listing finds (`engine.input_files`, Spark's own
rules for hidden names and folders) that no batch took, in name order,
`maxFilesPerTrigger` at a time. A connector that has a listed log keeps using
it under a classic session too, so it never reads a file twice.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from reconciler.engine.io.input_batch import BadInput, configured, with_file_column, write_checked
from reconciler.engine.io.input_files import (
    LISTED,
    input_files,
    listed_batches,
    listed_done,
    local_path,
    pending_stream_batch,
    seen_files,
)
from reconciler.engine.runtime import PipelineRuntime
from reconciler.state.connectors import ConnectorDefinition, ConnectorState
from reconciler.support.errors import ReconcileError
from reconciler.support.faults import crash_point


def uses_listed_batches(checkpoint: str) -> bool:
    folder = local_path(checkpoint)
    return folder is not None and (Path(folder) / LISTED).is_dir()


def ingest_listed(runtime: PipelineRuntime, connector: ConnectorDefinition,
                  state: ConnectorState, transaction: str) -> int:
    """Ingest the connector's new files as listed batches; returns how many ran."""
    name = connector.name
    checkpoint, source = local_path(state.input_checkpoint), connector.local_location
    if checkpoint is None or source is None:
        raise ReconcileError(f"input connector '{name}': over Spark Connect, a files "
                             "connector needs its input and its checkpoint on a local or "
                             "mounted path, which this client lists")
    if pending_stream_batch(checkpoint):
        raise ReconcileError(f"input connector '{name}': a streaming batch of an earlier run "
                             "never finished; finish it with --spark-master first")
    batches = listed_batches(checkpoint)
    done = listed_done(checkpoint)
    ran = 0
    for batch_id in sorted(set(batches) - done):
        _run(runtime, connector, state, checkpoint, batch_id, batches[batch_id], transaction)
        ran += 1
    new = sorted(input_files(source) - seen_files(checkpoint, batches))
    per_trigger = {key.lower(): value for key, value in connector.reader_options.items()}
    size = int(per_trigger.get("maxfilespertrigger", 0)) or len(new) or 1
    # After every batch this connector generation ever appended, streamed ones included.
    appended = runtime.storage.transaction_version(
        runtime.relations[connector.relation].path, transaction)
    next_id = max([*batches, -1 if appended is None else appended]) + 1
    for start in range(0, len(new), size):
        files = new[start:start + size]
        _record(checkpoint, next_id, files)
        _run(runtime, connector, state, checkpoint, next_id, files, transaction)
        next_id += 1
        ran += 1
    return ran


def _run(runtime: PipelineRuntime, connector: ConnectorDefinition, state: ConnectorState,
         checkpoint: str, batch_id: int, files: list[str], transaction: str) -> None:
    schema = runtime.table_schemas[connector.relation]
    frame = with_file_column(configured(runtime.spark.read, connector, schema)
                             .load(files))
    where = f"input connector '{connector.name}' ({connector.path})"
    try:
        write_checked(runtime, connector, state, frame, batch_id, transaction,
                      files=lambda: files)
    except BadInput as error:
        raise BadInput(connector.name, f"{where}: {error.message}", error.files) from error
    except ReconcileError as error:
        raise ReconcileError(f"{where}: {error}") from error
    crash_point("listed-batch-before-done")
    _write_atomically(Path(checkpoint) / LISTED / f"{batch_id}.done", "")


def _record(checkpoint: str, batch_id: int, files: list[str]) -> None:
    (Path(checkpoint) / LISTED).mkdir(parents=True, exist_ok=True)
    _write_atomically(Path(checkpoint) / LISTED / f"{batch_id}.json",
                      json.dumps({"files": files}))


def _write_atomically(target: Path, text: str) -> None:
    """Readers see the whole file or none (a crash mid-write leaves only a hidden temp)."""
    temporary = target.with_name(f".{target.name}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, target)
