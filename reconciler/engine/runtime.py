"""One pipeline's Delta state on Spark, read at the versions a manifest pins.

Every read goes through `frame()`, which pins the Delta version recorded for
the relation, so a reader never sees a write that no manifest has committed.
Views are evaluated by registering their inputs as temporary views under their
own names and running the view's query with Spark SQL.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from reconciler.desired.model.resolution import UNADDRESSABLE
from reconciler.desired.parsing.expectation_clauses import executable_view_query
from reconciler.engine.delta.relation import DeltaRelation
from reconciler.engine.delta.storage import DeltaStorage
from reconciler.engine.spark.local_rows import empty_frame
from reconciler.engine.spark.schema import spark_schema, struct_from_json
from reconciler.state.connectors import ConnectorDefinition, connector_definitions
from reconciler.state.layout import Layout
from reconciler.state.program import CommittedProgram, CommittedTable
from reconciler.state.relations import Kind, RelationRecord, StoredTable
from reconciler.support.errors import ReconcileError
from reconciler.support.progress import Reporter, no_progress


@cache
def table_schema(table: CommittedTable) -> StructType:
    """The Spark schema of a table: its type strings parsed once per table record (a record
    is frozen, so equal tables of successive programs share it)."""
    return spark_schema(table.columns)


def default_value(table: CommittedTable, column: str) -> Column:
    """A column's DEFAULT (a literal, checked when parsed) or NULL: what a row that does not
    give the column holds."""
    default = table.default(column)
    return F.lit(None) if default is None else F.expr(default)


@dataclass
class PipelineRuntime:
    """Reads, evaluates and writes the relations of one pipeline."""

    spark: SparkSession
    storage: DeltaStorage
    layout: Layout
    program: CommittedProgram
    relations: dict[str, RelationRecord] = field(default_factory=dict)
    report: Reporter = no_progress
    # This step's expectation counts by relation (`engine.expectations`).
    expectation_counts: dict[str, dict[str, Any]] = field(default_factory=dict)
    # This step's choices for `refresh: auto` views (`engine.maintenance.refresh_choice`),
    # described.
    refresh_choices: dict[str, str] = field(default_factory=dict)

    # The project folder, against which the program's connector paths are resolved.
    project_dir: Path = field(kw_only=True)
    # The program's connectors, typed and their paths resolved once (`connector_records`).
    connectors: dict[str, ConnectorDefinition] = field(init=False)
    # Each table's Spark schema, parsed from its columns once (`table_schema`).
    table_schemas: dict[str, StructType] = field(init=False)

    # The engine's own commits for its state tables, made on first use (`state_storage`).
    _engine_storage: DeltaStorage | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.connectors = connector_definitions(self.program.document, self.project_dir)
        self.table_schemas = {name: table_schema(table)
                              for name, table in self.program.tables.items()}

    def frame(self, name: str) -> DataFrame:
        return self.frame_of(self.relations[name])

    def frame_of(self, stored: StoredTable) -> DataFrame:
        """A relation (or a view's maintenance state) at the version its record pins."""
        return self.storage.read(stored.path, stored.version, self.schema_of(stored))

    def state_frame(self, name: str) -> DataFrame:
        """A maintained aggregate's per-group state at the version its record pins."""
        state = self.relations[name].state
        assert state is not None, f"{name} keeps no state"
        return self.frame_of(state)

    def relation(self, name: str) -> DeltaRelation:
        """A relation's table at the version its record pins, to read or to write (a write
        returns the relation at its new version, which `pin` records)."""
        record = self.relations[name]
        return DeltaRelation(self.storage, record.path, record.version, self.schema_of(record))

    def state(self, name: str) -> DeltaRelation:
        """A maintained aggregate's per-group state at its pinned version, written through
        `state_storage`."""
        state = self.relations[name].state
        assert state is not None, f"{name} keeps no state"
        return DeltaRelation(self.state_storage(state.path), state.path, state.version,
                             self.schema_of(state))

    def pin(self, name: str, written: DeltaRelation) -> None:
        """Record a write of `name`'s table, or of its state (told apart by their paths), at
        the version it made: the relation's row count is read from that version's log; its
        state entry is kept (a state's write keeps the relation's record)."""
        record = self.relations[name]
        if written.path == record.path:
            self.relations[name] = replace(record, version=written.version,
                                           rows=written.rows())
            return
        assert record.state is not None and written.path == record.state.path, written.path
        self.relations[name] = replace(record, state=record.state.at(written.version))

    def schema(self, name: str) -> StructType:
        """A relation's columns as its record holds them."""
        return self.schema_of(self.relations[name])

    @staticmethod
    def schema_of(stored: StoredTable) -> StructType:
        """A record's schema as a Spark type: the one place the engine decodes the JSON form
        the manifest keeps (`relation_records`), each distinct schema once."""
        return struct_from_json(stored.schema)

    def evaluate(self, view: str) -> DataFrame:
        """The contents of `view` computed from the pinned state of the relations it reads."""
        definition = self.program.views[view]
        for read in definition.reads:
            self.frame(read).createOrReplaceTempView(read)
        computed = self.spark.sql(executable_view_query(definition.sql))
        check_storable(computed.schema, f"view '{view}'")
        return computed

    def register_queryable(self, names: Collection[str]) -> None:
        """Each relation of `names` (a statement's, `relations_named`; others are ignored)
        as a temporary view under its own name, at its pinned version. Only those: each
        registration opens the relation's log and lists its files, which for every relation
        of a large pipeline took seconds per statement."""
        for relation in sorted(set(names) & self.relations.keys()):
            self.frame(relation).createOrReplaceTempView(relation)

    def create_table(self, name: str) -> RelationRecord:
        """Create (or empty, with the new schema) a table; returns its record."""
        schema = self.table_schemas[name]
        path = self.layout.relation("table", name)
        version = (self.storage.overwrite(path, empty_frame(self.spark, schema), schema)
                   if self.storage.latest_version(path) is not None
                   else self.storage.create(path, schema, change_feed=True))
        # The Delta log keeps `execute` app transactions across an overwrite: keep their mark.
        before = self.relations.get(name)
        inserts = (before.insert_txn if before is not None else None) or 0
        return self._record(name, "table", path, version, schema, rows=0, insert_txn=inserts)

    def write_view(self, name: str, contents: DataFrame) -> RelationRecord:
        """Replace a view's stored contents with `contents`; returns its record.

        Any maintenance state of the view is dropped with the old contents (it described
        them); the caller starts a new one when the view is maintained."""
        path = self.layout.relation("view", name)
        version = self.storage.replace(path, contents, contents.schema)
        return self._record(name, "view", path, version, contents.schema,
                            rows=self.storage.row_count(path, version))

    def state_storage(self, path: str) -> DeltaStorage:
        """What writes an aggregate's per-group state at `path`. Only the engine reads it, and
        a small one is rewritten whole each step: through Delta's writer an overwrite runs 5
        Spark jobs (Delta computes the snapshot of the version it replaces to list its
        files), through the engine's own commits 1 (Spark writes the Parquet files, delta-rs
        commits them and removes the files the log lists; `DeltaRsWriter`). A state table
        Delta's writer made (it has deletion vectors, which delta-rs does not write) stays
        with Delta's writer."""
        if not self.storage.writer.marks_rows or self.storage.engine_commit_bytes == 0:
            return self.storage  # (0: every commit of rows by Delta's writer, states too)
        existing = self.storage.find(path)
        if existing is not None and existing.deletion_vectors:
            return self.storage
        if self._engine_storage is None:
            self._engine_storage = DeltaStorage(self.spark, writer="delta-rs",
                                                storage_options=self.storage.options)
        return self._engine_storage

    def write_state(self, name: str, contents: DataFrame) -> None:
        """Replace the per-group state kept beside an aggregate view."""
        path = self.layout.state(name)
        version = self.state_storage(path).overwrite(path, contents, contents.schema)
        self.relations[name] = replace(self.relations[name], state=StoredTable(
            path, version, contents.schema.json()))

    def _record(self, name: str, kind: Kind, path: str, version: int, schema: StructType,
                rows: int, insert_txn: int | None = None) -> RelationRecord:
        """A new record for `name` (any old one, and its maintenance state, replaced)."""
        record = RelationRecord(path, version, schema.json(), kind=kind, rows=rows,
                                insert_txn=insert_txn)
        self.relations[name] = record
        return record


def check_storable(schema: StructType, subject: str) -> None:
    """Refuse, before anything is written, output columns no writer can keep apart or
    address: two of one name (case-insensitive, as Delta compares them) or a name with a
    dot or a backtick (`desired.model.resolution` refuses the same at validate, where it can only
    guess the name Spark gives an unnamed expression: this is the last word). A bootstrap
    computes every view it writes through here, so an apply never commits a view that
    its next step could not write."""
    seen: set[str] = set()
    for name in schema.names:
        if UNADDRESSABLE & set(name):
            raise ReconcileError(f"{subject}: output column '{name}' has a '.' or a '`' in its "
                                 "name: give it an alias (AS ...) without them")
        if name.lower() in seen:
            raise ReconcileError(f"{subject}: output column '{name}' appears twice: give the "
                                 "columns distinct aliases (AS ...)")
        seen.add(name.lower())
