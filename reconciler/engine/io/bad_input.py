"""Input files a `files` connector cannot take: named, and held or skipped, never lost.

A file is bad when Spark cannot read it (a truncated or corrupt Parquet or gzip file:
Spark's `FAILED_READ_FILE` names it) or when it holds malformed json/csv rows and the
connector's `on_error` is `fail`. What happens then is the connector's `on_bad_input`:

* `fail` (the default): the batch fails, so the connector keeps its offset and takes
  the file again on the next step (fixed in place, it goes in). The error names the
  file; the step goes on with the pipeline's other connectors (`engine.step`).
* `skip`: the file is recorded in the connector's checkpoint (`skipped/<batch>.json`,
  written before the batch's rows are appended, so a crash cannot lose the record),
  and the batch is read again without it. Every step copies the records into the
  connector's manifest state (`skipped_files`), where `reconcile status` shows them.

Each batch's rows carry the file they came from (`FILE_COLUMN`, from Spark's hidden
`_metadata` column), so malformed rows are traced to their files without reading any
file twice.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from reconciler.engine.delta.files import FileStore
from reconciler.engine.io.input_files import local_path
from reconciler.state.connectors import ConnectorState
from reconciler.support.errors import ReconcileError

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
    """One spelling per file: Spark writes local files as `file:` URIs, listings as paths."""
    local = local_path(file)
    return os.path.realpath(local) if local is not None else file


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
