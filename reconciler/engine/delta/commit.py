"""The distributed Delta writer: Spark's executors write the files, delta-rs commits them.

Without Delta's Spark jars there is no `format("delta")` writer, and collecting a
DataFrame to the driver to hand it to delta-rs caps a pipeline at what one
process can hold (and, over Spark Connect, ships every row to the client). So:

1. Spark writes the rows as Parquet into a fresh folder inside the table's
   location (`<table>/w-<id>/part-*.parquet`), in parallel, wherever the cluster
   runs. The files are Delta-compatible: the table's field names and types
   (`conform`), timestamps as `TIMESTAMP_MICROS`, NOT NULL checked by Spark.
2. The driver (or Spark Connect client) lists what was written through
   `pyarrow.fs` and reads each file's row count from its Parquet footer: no
   rows, no second Spark job, and it works wherever delta-rs can commit.
3. The driver (or Connect client) commits the files in ONE Delta transaction
   with delta-rs: `create_write_transaction` (append or overwrite, with app
   transactions for exactly-once appends) or `create_table_with_add_actions`.
   Each add carries `numRecords`, so row counts need no scan.

Files of a write that never committed are in no Delta log, so no reader ever
sees them; retention deletes them once they are old enough (`retention`).
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from deltalake import CommitProperties, DeltaTable, Schema, Transaction
from deltalake.exceptions import DeltaError
from deltalake.transaction import AddAction, RemoveAction, create_table_with_add_actions
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from reconciler.engine.delta.files import FileStore
from reconciler.engine.delta.log import hadoop_uri, is_local
from reconciler.engine.delta.parquet_stats import delta_stats
from reconciler.engine.delta.tables import COMMIT_TAG
from reconciler.engine.spark.schema import arrow_schema
from reconciler.support.errors import ReconcileError

WRITE_FOLDER_PREFIX = "w-"
"""Each write's files go to `<table>/w-<id>/`: what one write produced is one listing."""

PARQUET_CONF = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS"}
"""Delta readers expect microsecond timestamps; Spark's default (INT96) is legacy. A
runtime SQL conf (classic and Connect alike), set once by the storage that writes."""

_NOT_NULL_MARK = "reconciler: NULL in NOT NULL column "
_DELTA_NOT_NULL_MARK = "NOT NULL constraint violated for column: "


@dataclass(frozen=True)
class WrittenFile:
    """One data file of a write, as its Delta add action describes it."""

    path: str  # relative to the table's root
    size: int
    stats: str  # Delta's statistics JSON: row count, integer and date bounds (`parquet_stats`)
    modified_ms: int

    def add_action(self, data_change: bool = True) -> AddAction:
        return AddAction(self.path, self.size, {}, self.modified_ms, data_change, self.stats)


def write_files(spark: SparkSession, rows: DataFrame, uri: str, schema: T.StructType) -> list[
        WrittenFile]:
    """Have Spark write `rows`, already shaped to `schema` (`spark.schema.conform`: the
    storage shapes a frame once, where it enters), as Parquet files inside the table at
    `uri`, its NOT NULL columns checked as they are written."""
    folder = f"{WRITE_FOLDER_PREFIX}{uuid.uuid4().hex}"
    rows = _checked(rows, schema)
    target = f"{uri.rstrip('/')}/{folder}"
    with write_errors(uri):
        rows.write.mode("error").parquet(target if is_local(uri) else hadoop_uri(target))
    return list_written(uri, folder)


@contextmanager
def write_errors(uri: str) -> Iterator[None]:
    """A Spark write's usual failures as one line naming the table: a NULL in a NOT NULL
    column (ours, or Delta's invariant check) and a storage without its filesystem."""
    try:
        yield
    except Exception as error:
        text = str(error)
        mark = next((mark for mark in (_NOT_NULL_MARK, _DELTA_NOT_NULL_MARK) if mark in text),
                    None)
        if mark is not None:
            column = text.split(mark, 1)[1].split()[0].strip("'\".,")
            raise ReconcileError(f"{uri}: data does not fit the table schema: column "
                                 f"'{column}' is NOT NULL but a row has a NULL") from None
        if any(sign in text for sign in ("No FileSystem for scheme", "S3AFileSystem not found",
                                         "UnsupportedFileSystemException")):
            raise ReconcileError(f"Spark cannot write to {uri}: add the filesystem's jars to "
                                 "the cluster (e.g. hadoop-aws for s3a://)") from None
        raise


def list_written(uri: str, folder: str) -> list[WrittenFile]:
    """The Parquet files one write produced, with sizes and statistics from their footers.

    Listed through `pyarrow.fs` by the driver (or Spark Connect client), which must
    reach the storage anyway to commit; only footers are read, never rows. Files
    without rows (Spark writes one for an empty DataFrame) are left out of the commit.
    """
    store = FileStore.for_root(uri)
    location = f"{uri.rstrip('/')}/{folder}"
    written = []
    for name, size, modified in store.files(location):
        if "/" in name or not name.endswith(".parquet") or name.startswith(("_", ".")):
            continue  # _SUCCESS, .crc checksums, Spark's _temporary leftovers
        footer = store.parquet_footer(f"{location}/{name}")
        if footer.num_rows:
            written.append(WrittenFile(f"{folder}/{name}", size, delta_stats(footer),
                                       int(modified * 1000)))
    return sorted(written, key=lambda file: file.path)


def _checked(rows: DataFrame, schema: T.StructType) -> DataFrame:
    """NOT NULL columns checked while Spark writes (Delta writers enforce the schema)."""
    columns = []
    for field in schema.fields:
        column = F.col(f"`{field.name.replace('`', '``')}`")
        if not field.nullable:
            column = F.when(column.isNull(), F.raise_error(
                F.lit(f"{_NOT_NULL_MARK}'{field.name}'"))).otherwise(column)
        columns.append(column.alias(field.name))
    return rows.select(*columns)


@dataclass(frozen=True)
class CommitOf:
    """What one commit does besides adding its files.

    `tag`: its value under `COMMIT_TAG`, so the caller finds its version even if another
    writer committed right after. `overwrite`: every other file is removed. `replaces`
    (path, size): those files are removed, a compaction (same rows, fewer files:
    `dataChange=false`) or, with `changes_rows`, a copy-on-write update (files rewritten
    without some rows, plus new ones). `app_transaction` (app id, version): recorded by
    the same commit."""

    tag: str
    overwrite: bool = False
    replaces: Sequence[tuple[str, int]] = ()
    changes_rows: bool = False
    app_transaction: tuple[str, int] | None = None


def commit_files(uri: str, files: Sequence[WrittenFile], schema: T.StructType, what: CommitOf,
                 *, table: DeltaTable | None, storage_options: dict[str, str]) -> None:
    """One Delta commit adding `files`, doing `what` says; a new table is created by the
    same commit."""
    app_transaction, replaces = what.app_transaction, what.replaces
    mode: Literal["append", "overwrite"] = "overwrite" if what.overwrite else "append"
    properties = CommitProperties(
        custom_metadata={COMMIT_TAG: what.tag},
        app_transactions=[Transaction(*app_transaction)] if app_transaction else None)
    now = int(time.time() * 1000)
    data_change = what.changes_rows or not replaces
    adds = [file.add_action(data_change=data_change) for file in files]
    removes = [RemoveAction(path, data_change, now, size) for path, size in replaces]
    if table is None and removes:  # a caller's mistake: only an existing table has files
        raise ValueError(f"{uri}: no table yet, so no files to replace")
    try:
        if table is None:
            create_table_with_add_actions(uri, Schema.from_arrow(arrow_schema(schema)), adds,
                                          mode="error", storage_options=storage_options,
                                          commit_properties=properties)
        else:
            table.create_write_transaction([*adds, *removes], mode, arrow_schema(schema),
                                           commit_properties=properties)
    except DeltaError as error:
        lines = [line for line in str(error).splitlines() if line.strip()]
        raise ReconcileError(f"{uri}: Delta commit failed: "
                             f"{lines[0] if lines else type(error).__name__}") from error


def clustered(rows: DataFrame, pieces: int) -> DataFrame:
    """`rows` in `pieces` partitions, each a sorted range of the first column, so the files
    written have disjoint ranges of it (their Parquet statistics let a scan filtered on
    a range skip the others). A first column Spark cannot order (a map, a variant) only
    sets the number of pieces."""
    first = rows.schema.fields[0]
    if re.search(r"\b(map|variant)\b", first.dataType.simpleString()):
        return rows.coalesce(pieces)
    return rows.repartitionByRange(pieces, first.name).sortWithinPartitions(first.name)
