"""One version of a Delta table as its log describes it, opened once and asked many times.

A pinned read, a table's change between two versions, a row count, a merge, a
compaction and retention all ask the same questions of a version: which data
files it holds, and whether scanning those files as plain Parquet gives its rows
(no partition values in paths, no column mapping, no rows marked deleted in
deletion vectors). `DeltaVersion` wraps the delta-rs handle of that version and
answers each from the log once, so the code that reads tables asks one object
instead of passing the handle back and forth to free functions. Nothing here
needs a JVM or PySpark (`reconcile gc` reads logs with it).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import pyarrow as pa
from deltalake import DeltaTable

from reconciler.engine.delta.deletion_vectors import LiveFiles, live_files

ENGINE_COMMIT_FEATURES = frozenset({"appendOnly", "invariants", "deletionVectors",
                                    "timestampNtz"})
"""Table features a commit of whole new Parquet files by delta-rs honours: the legacy
ones Delta lists on every table with features (the append-only flag is checked, NOT NULL
is checked by Spark as it writes: `writer._checked`), deletion vectors on a version
without any, timestamps without a zone (plain Parquet)."""
ENGINE_APPEND_FEATURES = ENGINE_COMMIT_FEATURES | {"changeDataFeed"}
"""An insert-only commit also honours the change data feed: a commit without `cdc` files is
read by the feed from its added files (Delta's PROTOCOL.md, "Change Data Files")."""


@dataclass(frozen=True)
class DeltaVersion:
    """A table's version as delta-rs opened it; each fact is read from the log on first use."""

    uri: str
    table: DeltaTable

    @cached_property
    def version(self) -> int:
        return self.table.version()

    @cached_property
    def files(self) -> list[str]:
        """The version's data files, as delta-rs names them (absolute URIs)."""
        return self.table.file_uris()

    @cached_property
    def partitioned(self) -> bool:
        return bool(self.table.metadata().partition_columns)

    @cached_property
    def column_mapped(self) -> bool:
        """Whether the table names its Parquet columns by physical names (column mapping)."""
        mode = (self.table.metadata().configuration or {}).get("delta.columnMapping.mode",
                                                                 "none")
        return mode not in ("none", None)

    @cached_property
    def deletion_vectors(self) -> bool:
        """Whether the table may mark rows deleted in deletion vectors (the protocol feature)."""
        return "deletionVectors" in (self.table.protocol().reader_features or [])

    @cached_property
    def change_feed(self) -> bool:
        """Whether the table records its deleted rows for Delta's change data feed."""
        enabled = (self.table.metadata().configuration or {}).get(
            "delta.enableChangeDataFeed", "")
        return str(enabled).lower() == "true"

    @cached_property
    def replaceable_by_engine(self) -> bool:
        """Whether the engine's own commit (Spark writes Parquet files, delta-rs commits them:
        `DeltaRsWriter`) may replace every row of this version: its files are plain
        Parquet (`needs_delta_reader`), none has rows marked in a deletion vector (a remove
        must name the vector, which delta-rs's overwrite is not relied on to do), and the
        protocol asks only what such a commit keeps (`ENGINE_APPEND_FEATURES`: the change
        data feed reads a commit without `cdc` files from its added and removed files,
        Delta's PROTOCOL.md, "Change Data Files"). Anything else, a catalog-owned table or
        row tracking among them, stays with Delta's own writer."""
        configuration = self.table.metadata().configuration or {}
        return (not self.needs_delta_reader and not self.vectors
                and str(configuration.get("delta.appendOnly", "")).lower() != "true"
                and self._asks_only(ENGINE_APPEND_FEATURES))

    @cached_property
    def appendable_by_engine(self) -> bool:
        """Whether the engine's own commit may add Parquet files to this version: plain
        Parquet files (`needs_delta_reader`) and a protocol that asks only what such a
        commit keeps (`ENGINE_APPEND_FEATURES`). Rows marked deleted, the append-only flag
        and the change data feed do not concern an insert-only commit."""
        return not self.needs_delta_reader and self._asks_only(ENGINE_APPEND_FEATURES)

    def _asks_only(self, features: frozenset[str]) -> bool:
        """Whether a writer honouring only `features` may commit to this version. A protocol
        without table features implies them by its version: beyond writer 2 (append-only,
        invariants) or reader 1 it may ask for CHECK constraints or generated columns."""
        protocol = self.table.protocol()
        if protocol.writer_features is None:
            return protocol.min_writer_version <= 2 and protocol.min_reader_version <= 1
        return (set(protocol.writer_features) <= features
                and set(protocol.reader_features or []) <= features)

    @cached_property
    def needs_delta_reader(self) -> bool:
        """Whether raw Parquet scanning would be wrong whatever this version holds: partition
        values live in paths, column mapping renames the Parquet columns. (Deletion vectors
        make it wrong only for versions with deleted rows: `deleted_rows`.)"""
        return (self.partitioned or self.column_mapped
                or "columnMapping" in (self.table.protocol().reader_features or []))

    @cached_property
    def live(self) -> LiveFiles | None:
        """The data files with their deletion vectors, replayed from the log once (None for
        a table without the feature: no file has one)."""
        return live_files(self.uri, self.version) if self.deletion_vectors else None

    @cached_property
    def vectors(self) -> dict[str, str]:
        """Each data file that has a deletion vector, by its log path, with the vector's key:
        a file that gains deleted rows gets another key."""
        return {} if self.live is None else {
            file: vector.key for file, vector in self.live.vectors.items() if vector}

    @cached_property
    def deleted_rows(self) -> int:
        """Rows of this version's files that deletion vectors mark deleted (0 without them)."""
        return 0 if self.live is None else self.live.deleted_rows

    @property
    def files_are_rows(self) -> bool:
        """Whether this version's rows are its files' rows, read by name or by physical name
        (`column_mapped`): not partitioned and no row marked deleted."""
        return not self.partitioned and self.deleted_rows == 0

    def recorded_transaction(self, app_id: str) -> int | None:
        """The last app-transaction version this version records for ``app_id``, or None."""
        return self.table.transaction_version(app_id)

    def add_actions(self) -> pa.Table:
        """The version's add actions, one row per data file (path, size_bytes, num_records)."""
        return pa.table(self.table.get_add_actions(flatten=True))

    def data_bytes(self) -> int | None:
        """Bytes of the version's data files, from its log (no data read; rows a deletion
        vector marks count still); None for a table only Delta's Spark reader can open."""
        if self.needs_delta_reader:
            return None
        return int(sum(self.add_actions().column("size_bytes").to_pylist()))
