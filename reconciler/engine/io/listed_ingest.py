"""A `files` input connector without Structured Streaming: the client lists, Spark reads.

A step reads exactly the new files it fixed, as one bounded batch read, with no
streaming query to start (a query per step ran as many Spark jobs, but its
start-up put the first job of a one-shot `reconcile run` 6-8 s later on 2 cores,
measured with Spark's event log). The
client does the file source's bookkeeping itself, in the connector's checkpoint
folder, and Spark reads each batch's files as a batch DataFrame:

1. `listed/N.json` records the files of batch N before anything is read
   (Structured Streaming's `offsets/N`);
2. the rows are blindly appended as the Delta app transaction (connector
   generation, N), so a batch redone after a crash lands once
   (`engine.input_batch`); the append reads no row of the stored table (Delta's
   writer still computes a large table's snapshot: `DeltaStorage.append`);
3. `listed/N.done` marks it finished (`commits/N`).

A batch with a `.json` and no `.done` is redone with exactly its files first.
New files are those the local listing finds (`engine.input_files`, Spark's own
rules for hidden names and folders) that no batch took, in name order,
`maxFilesPerTrigger` at a time.

Which connectors use it (`uses_listed_batches`): every one whose input and
checkpoint are on a local (or mounted) path, since the client lists them here.
A connector whose checkpoint holds a Structured Streaming log moves over: the
files its source log records are taken already (`seen_files`), and its listed
batches are numbered after the last batch its table's app transaction records.
Until then a stream batch it left unfinished (`offsets/N` without `commits/N`)
is finished by the stream itself, which redoes exactly that batch once. Object
storage (`s3a://`) inputs or checkpoints, which this client cannot list, and
options only Spark's stream implements (`cleanSource`, `latestFirst`, ...) keep
the streaming query (`engine.io.connectors`); over Spark Connect, where a
stream's `foreachBatch` would run on the server, only the listed path is there.
A connector that has a listed log keeps using it, so it never reads a file twice.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from reconciler.engine.io.input_batch import BadInput, read_files, with_file_column, write_checked
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

STREAM_ONLY_OPTIONS = frozenset(
    {"cleansource", "sourcearchivedir", "latestfirst", "maxfileage", "filenameonly"})
"""Spark's file-source options that only its streaming query implements (moving or
deleting read files, newest first, forgetting old ones, names without folders)."""


def uses_listed_batches(connector: ConnectorDefinition, checkpoint: str, connect: bool
                        ) -> bool:
    """Whether a files connector is ingested as listed batches (else by a streaming query).

    Its input and checkpoint must be local (the client lists them); then yes, unless its
    checkpoint's stream left a batch unfinished, which the stream finishes, or it sets an
    option only the stream implements. A connector with a listed log, or over Spark
    Connect, always is."""
    folder = local_path(checkpoint)
    if folder is not None and (Path(folder) / LISTED).is_dir():
        return True
    if connect:
        return True
    if folder is None or connector.local_location is None:
        return False
    if pending_stream_batch(folder):
        return False
    return not any(key.lower() in STREAM_ONLY_OPTIONS and str(value).lower() not in
                   ("off", "false") for key, value in connector.reader_options.items())


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
    frame = with_file_column(read_files(runtime, connector, schema, files))
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
