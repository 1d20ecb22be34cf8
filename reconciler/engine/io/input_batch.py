"""One batch of a `files` input connector: read with the table's columns, appended once;
its bad files named, and held or skipped, never lost.

json and csv are read permissively, keeping each malformed line in a corrupt-record
column: such rows fail the batch naming their files (nothing is appended, the source
does not move on), or with `on_error: quarantine` go to the batch's quarantine folder,
or with `on_bad_input: skip` their files are skipped. The rows are appended as the
Delta app transaction (connector generation, batch id), so a batch replayed after a
crash writes nothing twice. A `changes: true` connector's rows carry an `_op` column
(`insert` / `delete`, as our outputs write it): its batch is applied as one change,
deletions included, under the same app transaction. Both the streaming path and the
listed path (`engine.io.listed_ingest`) go through here.

A file is bad when Spark cannot read it (a truncated or corrupt Parquet or gzip file:
Spark's `FAILED_READ_FILE` names it) or when it holds malformed json/csv rows and the
connector's `on_error` is `fail`. What happens then is the connector's `on_bad_input`:

* `fail` (the default): the batch fails (`BadInput`), so the connector keeps its offset
  and takes the file again on the next step (fixed in place, it goes in). The error
  names the file; the step goes on with the pipeline's other connectors (`engine.step`).
* `skip`: the file is recorded in the connector's checkpoint (`skipped/<batch>.json`,
  written before the batch's rows are appended, so a crash cannot lose the record),
  and the batch is read again without it. Every step copies the records into the
  connector's manifest state (`skipped_files`), where `reconcile status` shows them.

Each batch's rows carry the file they came from (`FILE_COLUMN`, from Spark's hidden
`_metadata` column), so malformed rows are traced to their files without reading any
file twice.
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import urlparse

from pyspark.sql import DataFrame, DataFrameReader
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamReader
from pyspark.sql.types import StringType, StructField, StructType

from reconciler.engine.delta.files import FileStore
from reconciler.engine.delta.merge import apply_changes
from reconciler.engine.delta.relation import DeltaRelation
from reconciler.engine.io.file_tree import OBJECT_SCHEMES, object_file
from reconciler.engine.io.input_files import file_name
from reconciler.engine.maintenance.zset import OP_COLUMN
from reconciler.engine.runtime import PipelineRuntime
from reconciler.engine.spark.checkpoints import unless_empty
from reconciler.engine.spark.micro_batch import micro_batch, static_plan
from reconciler.state.connectors import ConnectorDefinition, ConnectorState
from reconciler.state.program import CommittedTable
from reconciler.support.errors import ReconcileError

CORRUPT_COLUMN = "_corrupt_record"
FILE_COLUMN = "_input_file"
SKIPPED = "skipped"
SHOWN_FILES = 3
"""Files named in one error line; the count says how many more there are."""

_UNREADABLE = re.compile(r"Encountered error while reading file (\S+?)\.?\s")
_CAUSE = re.compile(r"Caused by: [\w.$]+(?:Exception|Error): (.+)")


class BadInput(ReconcileError):
    """A connector's batch holds files it cannot take (`files`); the step goes on without
    this connector, which keeps its offset."""

    def __init__(self, connector: str, message: str, files: list[str]):
        self.connector = connector
        self.files = files
        super().__init__(message)


def with_file_column(frame: DataFrame) -> DataFrame:
    """The rows of a file source with the file each came from."""
    return frame.select("*", F.col("_metadata.file_path").alias(FILE_COLUMN))


def shown(files: list[str]) -> str:
    more = len(files) - SHOWN_FILES
    return ", ".join(files[:SHOWN_FILES]) + (f" and {more} more" if more > 0 else "")


def unreadable_file(error: BaseException) -> tuple[str, str] | None:
    """(file, why) when `error` is Spark failing to read one input file, else None."""
    text = "\n".join(str(cause) for cause in _chain(error))
    found = _UNREADABLE.search(text)
    if found is None:
        return None
    file = found.group(1)
    cause = _CAUSE.search(text, found.end())
    why = cause.group(1).replace(file, "").strip(" .:") if cause else "Spark cannot read it"
    return file, why or "Spark cannot read it"


def _chain(error: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def record_skipped(checkpoint: str, batch_id: int, skipped: dict[str, str]) -> None:
    """Write the batch's skipped files (file -> why) to the checkpoint, replacing an earlier
    record of the same batch (a batch redone after a crash finds the same files)."""
    store = FileStore.for_root(checkpoint)
    store.write_bytes(f"{checkpoint.rstrip('/')}/{SKIPPED}/{batch_id}.json", json.dumps(
        {"batch": batch_id, "files": skipped}, sort_keys=True).encode())


def skipped_files(checkpoint: str) -> list[dict[str, Any]]:
    """Every file the connector skipped, in batch order: {file, reason, batch}."""
    store = FileStore.for_root(checkpoint)
    folder = f"{checkpoint.rstrip('/')}/{SKIPPED}"
    records = []
    for relative, _, _ in store.files(folder):
        if relative.endswith(".json") and relative[:-5].isdigit():
            records.append(json.loads(store.read_bytes(f"{folder}/{relative}")))
    return [{"file": file, "reason": reason, "batch": record["batch"]}
            for record in sorted(records, key=lambda r: r["batch"])
            for file, reason in sorted(record["files"].items())]


SetAside = Callable[[dict[str, str]], None]
"""Records files (file -> why) as skipped in the batch, before its rows are written."""


def write_skipping(write: Callable[[DataFrame, SetAside | None], None], frame: DataFrame, *,
                   connector: str, policy: str, checkpoint: str, batch_id: int,
                   files: Callable[[], list[str]],
                   reread: Callable[[list[str]], DataFrame]) -> None:
    """`write(frame, set_aside)` one batch; a file Spark cannot read fails it (`BadInput`),
    or with `policy` skip is recorded and the batch read again (`reread`) from the batch's
    other `files`, until it writes. `set_aside` (None unless skipping) is how `write`
    skips files of its own finding (malformed rows)."""
    skipped: dict[str, str] = {}

    def set_aside(more: dict[str, str]) -> None:
        skipped.update({canonical(file): why for file, why in more.items()})
        record_skipped(checkpoint, batch_id, skipped)

    while True:
        try:
            write(frame, set_aside if policy == "skip" else None)
            return
        except BadInput:
            raise
        except Exception as error:
            bad = unreadable_file(error)
            if bad is None:
                raise
            file, why = bad
            if policy != "skip" or canonical(file) in skipped:
                raise BadInput(connector, f"cannot read {canonical(file)} ({why}); fix or "
                               "remove it, or set on_bad_input: skip",
                               [canonical(file)]) from error
            set_aside({file: why})
            frame = reread([name for name in files() if canonical(name) not in skipped])


def canonical(file: str) -> str:
    """One spelling per file: Spark writes local files as `file:` URIs and objects'
    names percent-encoded, listings as paths and keys (`input_files.file_name`)."""
    return file_name(file)


def stream_batch_files(checkpoint: str, batch_id: int) -> list[str]:
    """The files Structured Streaming planned for batch `batch_id`, from its source log
    (`sources/0/<id>`, or the compacted file that absorbed it, every line a file)."""
    store = FileStore.for_root(checkpoint)
    folder = f"{checkpoint.rstrip('/')}/sources/0"
    names = {relative for relative, _, _ in store.files(folder) if "/" not in relative}
    compacted = sorted(int(name.split(".")[0]) for name in names
                       if name.endswith(".compact") and name.split(".")[0].isdigit())
    if str(batch_id) in names:
        log = str(batch_id)
    else:
        log = next((f"{n}.compact" for n in compacted if n >= batch_id), str(batch_id))
    lines = store.read_bytes(f"{folder}/{log}").decode().splitlines()[1:]
    entries = [json.loads(line) for line in lines if line.strip()]
    return [entry["path"] for entry in entries if entry.get("batchId", batch_id) == batch_id]


def note_skipped(state: ConnectorState) -> None:
    """Copy the checkpoint's record of skipped files into the connector's manifest state."""
    skipped = skipped_files(state.input_checkpoint)
    if skipped:
        state.skipped_files = skipped


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


def read_files(runtime: PipelineRuntime, connector: ConnectorDefinition, schema: StructType,
               files: list[str]) -> DataFrame:
    """A batch read of some of a files connector's files. Like Spark's streaming file
    source, a folder input is their partitions' base path, so a file under `day=1/` has
    its partition column as the stream gives it."""
    reader = configured(runtime.spark.read, connector, schema)
    if "basepath" not in {key.lower() for key in connector.reader_options}:
        base = _base_path(connector, files)
        if base is not None:
            reader = reader.option("basePath", base)
    return reader.load(files)


def _base_path(connector: ConnectorDefinition, files: list[str]) -> str | None:
    """The folder a batch's partitions start from, as the stream takes its path: the
    input's folder (spelt as the files are), unless the input is a glob or one file."""
    location, folder = connector.location, connector.local_location
    if glob.has_magic(location):
        return None
    if folder is not None:
        return folder if os.path.isdir(folder) else None
    if urlparse(location).scheme.lower() not in OBJECT_SCHEMES:
        return None
    root = object_file(location)
    return root if any(file.startswith(root + "/") for file in files) else None


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
        land_batch(runtime, table, good, marked=connector.changes, transaction=transaction,
                   batch_id=batch_id)
    finally:
        if checked:
            cached.unpersist()


def _without_bad_files(bad: DataFrame, rows: DataFrame, bad_rows: int, batch_id: int,
                       name: str, set_aside: SetAside | None) -> DataFrame:
    """`rows` without the files that hold malformed rows, which are set aside; without
    `set_aside`, BadInput naming them. Only file names and counts reach the driver, one
    row per bad file of the batch."""
    per_file = {row[FILE_COLUMN]: row["count"]
                for row in bad.groupBy(FILE_COLUMN).count().collect()}  # small: a row per bad file
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
    (see the module docstring); `files` lists the batch's files, asked only to skip one."""
    schema = runtime.table_schemas[connector.relation]

    def reread(remaining: list[str]) -> DataFrame:
        if not remaining:  # every file skipped: an empty batch still advances the offset
            return frame.limit(0)
        return with_file_column(read_files(runtime, connector, schema, remaining))

    write_skipping(lambda rows, set_aside: write_batch(
        runtime, connector, rows, batch_id, transaction=transaction,
        generation=state.input_generation, set_aside=set_aside), frame, connector=connector.name,
        policy=connector.on_bad_input, checkpoint=state.input_checkpoint,
        batch_id=batch_id, files=files, reread=reread)


def land_batch(runtime: PipelineRuntime, table: str, rows: DataFrame, *, marked: bool,
               transaction: str, batch_id: int) -> None:
    """Write one batch of any input connector (files, Delta, Kafka) to its table, as the
    Delta app transaction (`transaction`, `batch_id`), so a batch replayed after a crash
    lands once: its rows cast to the table's columns, with their DEFAULTs where they hold
    NULL, appended; or, `marked` with `_op` (a `changes: true` connector, or a source's
    change data feed), applied as one change."""
    columns = [F.col(f.name).cast(f.dataType).alias(f.name)
               for f in runtime.table_schemas[table]]
    if marked:
        _apply_change_rows(runtime, table, rows.select(
            *columns, F.lower(F.col(OP_COLUMN)).alias(OP_COLUMN)), batch_id, transaction)
        return
    runtime.storage.append(runtime.relations[table].path,
                           with_defaults(rows.select(*columns), runtime.program.tables[table]),
                           app_id=transaction, txn_version=batch_id)


def _apply_change_rows(runtime: PipelineRuntime, table: str, rows: DataFrame, batch_id: int,
                       transaction: str) -> None:
    """A `changes: true` batch (`rows`: the table's columns and `_op`, lower-cased): rows
    marked `_op` = insert are added, `_op` = delete remove one equal row each (a delete of
    a row the table does not hold removes nothing). One Delta commit, recorded as the
    batch's app transaction, so a replay changes nothing."""
    schema = runtime.table_schemas[table]
    marked = rows.cache()
    try:
        known = F.coalesce(F.col(OP_COLUMN).isin("insert", "delete"), F.lit(False))
        with static_plan(runtime.spark):  # a global count: 1 job, not 3
            counted = marked.agg(F.count(F.lit(1)), F.count_if(~known)).first()
        assert counted is not None  # an aggregate without grouping has one row
        size, unknown = counted
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
        # Planned statically when small, as the step's maintenance is: with adaptive
        # execution Delta's MERGE ran 27 jobs for a 40-row batch. (Not `steady_source`:
        # Delta refuses a MERGE whose source is cached, as `marked` is, unless it copies it.)
        with micro_batch(runtime.spark, size):
            apply_changes(DeltaRelation(runtime.storage, record.path, latest, schema), inserts,
                          unless_empty(deletes), app_transaction=(transaction, batch_id),
                          distinct=bool(runtime.program.tables[table].primary_key))
    finally:
        marked.unpersist()
