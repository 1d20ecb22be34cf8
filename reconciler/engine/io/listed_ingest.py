"""A `files` input connector without Structured Streaming: the client lists, Spark reads.

A step reads exactly the new files it fixed, as one bounded batch read, with no
streaming query to start (a query per step ran as many Spark jobs, but its
start-up put the first job of a one-shot `reconcile run` 6-8 s later on 2 cores,
measured with Spark's event log). The client does the file source's bookkeeping
itself, in the connector's checkpoint folder, and Spark reads each batch's files as a
batch DataFrame (through its own file system: S3A for `s3a://`):

1. `listed/N.json` records the files of batch N before anything is read
   (Structured Streaming's `offsets/N`);
2. the rows are blindly appended as the Delta app transaction (connector
   generation, N), so a batch redone after a crash lands once
   (`engine.io.input_batch`); the append reads no row of the stored table;
3. `listed/N.done` marks it finished (`commits/N`).

A batch with a `.json` and no `.done` is redone with exactly its files first.
New files are those the listing finds (`engine.io.input_files`, Spark's own rules for
hidden names and folders) that no batch took, in name order, `maxFilesPerTrigger` at a
time. Every `COMPACT_EVERY` batches, as Spark compacts its source log, their records
are folded into one `listed/N.compact` (every file of the batches up to N, all of them
done) and the single records removed, so what a step reads of the log stays bounded
however many steps ran (on S3 each record is a request).

Which connectors use it (`uses_listed_batches`): every one whose input and checkpoint
the client reaches (`engine.io.file_tree`): a local or mounted path, or S3 (`s3a://`,
`s3://`), listed from the client with the operator's AWS environment. A connector whose
checkpoint holds a Structured Streaming log moves over: the files its source log records
are taken already (`CheckpointLog.seen`), and its listed batches are numbered after the
last batch its table's app transaction records. Until then a stream batch it left
unfinished (`offsets/N` without `commits/N`) is finished by the stream itself, which
redoes exactly that batch once. Options only Spark's stream implements (`cleanSource`,
`latestFirst`, ...) and file systems the client cannot list (`gs://`, `hdfs://`, ...)
keep the streaming query (`engine.io.files_connector`); over Spark Connect, where a stream's
`foreachBatch` would run on the server, only the listed path is there. A connector that
has a listed log keeps using it, so it never reads a file twice.
"""

from __future__ import annotations

import json

from reconciler.engine.io.file_tree import file_tree
from reconciler.engine.io.input_batch import BadInput, read_files, with_file_column, write_checked
from reconciler.engine.io.input_files import LISTED, CheckpointLog, input_files
from reconciler.engine.runtime import PipelineRuntime
from reconciler.state.connectors import ConnectorDefinition, ConnectorState
from reconciler.support.errors import ReconcileError
from reconciler.support.faults import crash_point

STREAM_ONLY_OPTIONS = frozenset(
    {"cleansource", "sourcearchivedir", "latestfirst", "maxfileage", "filenameonly"})
"""Spark's file-source options that only its streaming query implements (moving or
deleting read files, newest first, forgetting old ones, names without folders)."""

COMPACT_EVERY = 10
"""Batch records folded into one compaction (Spark's `fileSource.log.compactInterval`)."""


def uses_listed_batches(connector: ConnectorDefinition, checkpoint: str, connect: bool,
                        log: CheckpointLog | None = None) -> bool:
    """Whether a files connector is ingested as listed batches (else by a streaming query).

    Its input and checkpoint must be where the client lists (`file_tree`); then yes,
    unless its checkpoint's stream left a batch unfinished, which the stream finishes, or
    it sets an option only the stream implements. A connector with a listed log, or over
    Spark Connect, always is. `log`: the checkpoint, when the caller has read it."""
    log = CheckpointLog.read(checkpoint) if log is None else log
    if log is not None and log.has_listed:
        return True
    if connect:
        return True
    if log is None or file_tree(connector.location) is None:
        return False
    if log.pending_stream_batch():
        return False
    return not any(key.lower() in STREAM_ONLY_OPTIONS and str(value).lower() not in
                   ("off", "false") for key, value in connector.reader_options.items())


def ingest_listed(runtime: PipelineRuntime, connector: ConnectorDefinition,
                  state: ConnectorState, transaction: str,
                  log: CheckpointLog | None = None) -> int:
    """Ingest the connector's new files as listed batches; returns how many ran."""
    name = connector.name
    log = CheckpointLog.read(state.input_checkpoint) if log is None else log
    if log is None or file_tree(connector.location) is None:
        raise ReconcileError(f"input connector '{name}': over Spark Connect, a files "
                             "connector needs its input and its checkpoint on a local or "
                             "mounted path or on S3, which this client lists")
    if log.pending_stream_batch():
        raise ReconcileError(f"input connector '{name}': a streaming batch of an earlier run "
                             "never finished; finish it with --spark-master first")
    records = dict(log.batches())
    compaction = _Compaction(log, records)
    ran = 0
    for batch_id in log.unfinished():
        _run(runtime, connector, state, log, batch_id, records[batch_id], transaction)
        compaction.after(batch_id)
        ran += 1
    new = sorted(input_files(connector.location) - log.seen())
    per_trigger = {key.lower(): value for key, value in connector.reader_options.items()}
    size = int(per_trigger.get("maxfilespertrigger", 0)) or len(new) or 1
    # After every batch this connector generation ever appended, streamed ones included.
    appended = runtime.storage.transaction_version(
        runtime.relations[connector.relation].path, transaction)
    last = log.last_batch()
    next_id = max(-1 if last is None else last, -1 if appended is None else appended) + 1
    for start in range(0, len(new), size):
        files = new[start:start + size]
        log.tree.write_text(log.path(f"{LISTED}/{next_id}.json"), json.dumps({"files": files}))
        records[next_id] = files
        _run(runtime, connector, state, log, next_id, files, transaction)
        compaction.after(next_id)
        next_id += 1
        ran += 1
    return ran


def _run(runtime: PipelineRuntime, connector: ConnectorDefinition, state: ConnectorState,
         log: CheckpointLog, batch_id: int, files: list[str], transaction: str) -> None:
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
    log.tree.write_text(log.path(f"{LISTED}/{batch_id}.done"), "")


class _Compaction:
    """Folds done batches' records into `listed/N.compact` every `COMPACT_EVERY` batches.

    Batches finish in order (unfinished ones are redone before any new one is recorded),
    so when batch N is done every batch up to N is. The compaction is written whole
    (atomically) before the records it replaces are removed: a crash in between leaves
    records that readers ignore (at or below the newest compaction) and the next
    compaction removes."""

    def __init__(self, log: CheckpointLog, records: dict[int, list[str]]):
        self.log = log
        self.records = records
        self.files: list[str] | None = None  # the newest compaction's, read when needed
        prefix = f"{LISTED}/"
        self.known = [name[len(prefix):] for name in log.names if name.startswith(prefix)]

    def after(self, batch_id: int) -> None:
        """Batch `batch_id` is done: compact if enough records have gathered."""
        if len([batch for batch in self.records if batch <= batch_id]) < COMPACT_EVERY:
            return
        if self.files is None:
            self.files = self.log.compacted_files()
        done = sorted(batch for batch in self.records if batch <= batch_id)
        self.files = sorted({*self.files, *(file for batch in done
                                            for file in self.records[batch])})
        tree, path = self.log.tree, self.log.path
        tree.write_text(path(f"{LISTED}/{batch_id}.compact"), json.dumps({"files": self.files}))
        stale = {*self.known, *(f"{batch}.{kind}" for batch in done for kind in ("json", "done"))}
        for name in sorted(stale):
            number, _, kind = name.partition(".")
            if number.isdigit() and (int(number) < batch_id if kind == "compact"
                                     else int(number) <= batch_id):
                tree.remove(path(f"{LISTED}/{name}"))
        for batch in done:
            del self.records[batch]
        self.known = [f"{batch_id}.compact"]
