"""One step of a running pipeline: ingest, refresh, emit; the caller commits.

A step ingests every input connector to the end of its available input (one held
by a bad input file, `engine.io.input_batch`, is left at its offset while the others go
on), then
refreshes the views whose inputs changed (in dependency order): a maintained
view from its inputs' changes (`engine/maintenance`), any other by recomputing
it. Each changed relation's change (a Z-set) goes to its output connectors as
`_op` = insert/delete rows, and to the views that read it. When no table has a
Delta version newer than the manifest's, nothing runs on Spark and nothing is
committed. Expectations are checked on each changed relation's inserted rows
(`engine.expectations`): one with FAIL UPDATE raises before the caller commits.

Table versions newer than the manifest's can also come from a step that crashed
before its commit: they hold rows ingested exactly once (app transactions) that
the connector's checkpoint has moved past, so the next step adopts them. An
`execute` that crashed is different: its rows are discarded (see
`discard_uncommitted_inserts`), so re-running the INSERT adds them once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

from reconciler.engine.delta.compaction import compact
from reconciler.engine.expectations import check_table
from reconciler.engine.io.connector_types import connector_type
from reconciler.engine.io.connectors import emit, ingest, outputs_by_relation
from reconciler.engine.io.input_batch import BadInput
from reconciler.engine.maintenance.frames import StepFrames
from reconciler.engine.maintenance.zset import ZSet
from reconciler.engine.refresh import refresh_views
from reconciler.engine.runtime import PipelineRuntime
from reconciler.engine.spark.micro_batch import micro_batch
from reconciler.state.connectors import ConnectorState, connector_definitions
from reconciler.state.program import CommittedProgram
from reconciler.state.relations import RelationRecord
from reconciler.support.faults import crash_point


@dataclass
class StepResult:
    ingested: dict[str, int] = field(default_factory=dict)
    changed_tables: list[str] = field(default_factory=list)
    refreshed: list[str] = field(default_factory=list)
    emitted: dict[str, int] = field(default_factory=dict)
    discarded_inserts: list[str] = field(default_factory=list)
    connectors: dict[str, ConnectorState] = field(default_factory=dict)
    bad_input: dict[str, str] = field(default_factory=dict)
    """Input connectors held by a bad file this step (name -> the one-line error)."""

    @property
    def has_changes(self) -> bool:
        return bool(self.changed_tables or self.discarded_inserts)


def insert_app_id(pipeline: str) -> str:
    """The Delta app-transaction id of `reconcile execute` writes to a pipeline's tables."""
    return f"reconcile:{pipeline}:execute"


def discard_uncommitted_inserts(runtime: PipelineRuntime) -> list[str]:
    """Undo `execute` writes whose manifest commit never happened.

    An insert is tagged with an app-transaction version one above the last committed
    one (`insert_txn` in the table's state). A higher version in the table means an
    `execute` wrote and then crashed before its commit: the table is restored to the
    committed version, so re-running that INSERT does not add the rows twice.
    Ingested batches are different: they are adopted, because their connector's
    checkpoint has already moved past them.
    """
    discarded = []
    app = insert_app_id(runtime.layout.pipeline)
    for table in runtime.program.tables:
        record = runtime.relations[table]
        latest = runtime.storage.find(record.path)  # once: its transactions and its version
        written = latest.recorded_transaction(app) if latest is not None else None
        if latest is None or written is None or written <= (record.insert_txn or 0):
            continue
        version = record.version
        if latest.version != version:
            version = runtime.storage.restore(record.path, version)
            discarded.append(table)
        # Either way the next insert must use a higher transaction version than `written`.
        runtime.relations[table] = replace(record, version=version, insert_txn=written)
    return discarded


def missing_inputs(program: CommittedProgram, base_dir: Path) -> list[str]:
    """One line per input connector whose local folder does not exist: a mistyped `path`
    would otherwise read as `no new input` forever. Object stores are not listed here."""
    return [f"input connector '{name}' reads {connector.path}, which does not exist "
            f"({connector.local_location})"
            for name, connector in connector_definitions(program.document, base_dir).items()
            if connector.is_input and connector.local_location is not None
            and not Path(connector.local_location).exists()]


def has_pending_input(program: CommittedProgram, relations: dict[str, RelationRecord],
                      connectors: dict[str, ConnectorState], base_dir: Path) -> bool:
    """Whether a step could find anything to do, decided without Spark.

    New files in an input folder, or a table version newer than the manifest's (an
    ingestion or insert that crashed before its commit), mean yes. Sources that
    cannot be listed from here count as yes, and Spark decides.
    """
    from reconciler.engine.delta.log import probe_latest_version

    for name, connector in connector_definitions(program.document, base_dir).items():
        if not connector.is_input:
            continue
        if connector_type(connector).pending(connector, connectors[name]):
            return True
    return any(probe_latest_version(relations[table].path) != relations[table].version
               for table in program.tables)


def run_step(runtime: PipelineRuntime, connectors: dict[str, ConnectorState], *, serial: int,
             ingest_inputs: bool = True,
             after_discard: Callable[[PipelineRuntime], None] | None = None) -> StepResult:
    """Advance the pipeline by one step; `runtime.relations` is updated in place.

    `after_discard` (used by `execute`) writes into tables once uncommitted inserts
    are gone and before the step looks for changed tables.
    """
    program = runtime.program
    result = StepResult(discarded_inserts=discard_uncommitted_inserts(runtime),
                        connectors={name: state.copy_for_step()
                                    for name, state in connectors.items()})
    if after_discard is not None:
        after_discard(runtime)
    if ingest_inputs:
        for name, connector in runtime.connectors.items():
            if connector.is_input:
                runtime.report("ingest", name)
                try:
                    ingested = ingest(runtime, connector, result.connectors[name])
                except BadInput as error:  # held at its offset; the others go on
                    result.bad_input[name] = str(error)
                    continue
                if ingested is not None:
                    result.ingested[name] = ingested.batches
        crash_point("step-after-ingest")
    before = dict(runtime.relations)  # records are frozen: the state the step starts from
    frames = StepFrames(runtime.spark, old=lambda name: runtime.frame_of(before[name]),
                        new=runtime.frame)
    for table in program.tables:
        latest = runtime.relation(table).latest()  # ingestion or `execute` wrote a version
        if latest.version != before[table].version:
            runtime.pin(table, latest)
            frames.changes[table] = table_change(runtime, before[table], runtime.relations[table])
            result.changed_tables.append(table)
    if not result.changed_tables:
        return result
    outputs = outputs_by_relation(runtime.connectors)

    def emit_change(relation: str, change: ZSet) -> None:
        changelog = change.changes()
        if changelog is None:
            return
        for connector in outputs.get(relation, []):
            result.emitted[connector] = emit(runtime, runtime.connectors[connector], changelog,
                                             serial, snapshot=False, rows=change.rows)

    def changed(table: str) -> ZSet:  # read when called: after a DROP ROW delete, the new one
        return table_change(runtime, before[table], runtime.relations[table])
    touched = _touched_rows(runtime, before, result.changed_tables)
    with micro_batch(runtime.spark, _total(touched.values())):
        try:
            _maintain(runtime, result, frames, touched, emit_change, changed, outputs)
        finally:
            frames.close()
    for relation in [*result.changed_tables, *result.refreshed]:  # last: reads used the files
        compacted = compact(runtime.storage, runtime.relations[relation].path)
        if compacted is not None:
            runtime.relations[relation] = runtime.relations[relation].at(compacted)
    return result


def _maintain(runtime: PipelineRuntime, result: StepResult, frames: StepFrames,
              touched: dict[str, int | None], emit_change: Callable[[str, ZSet], None],
              changed: Callable[[str], ZSet], outputs: dict[str, list[str]]) -> None:
    """Check each changed table's change and refresh the views that read one."""
    for table in result.changed_tables:
        change = check_table(runtime, table, frames.changes.pop(table),
                             partial(changed, table))
        if not change.is_empty:  # else rows that net to nothing: no reader has a change
            frames.changes[table] = change
            emit_change(table, change)
    result.refreshed = refresh_views(runtime, frames, emit_change, touched, output=outputs)


def _touched_rows(runtime: PipelineRuntime, before: dict[str, RelationRecord],
                  tables: list[str]) -> dict[str, int | None]:
    """Per changed table, the rows its change touched, from the Delta log (no Spark job):
    whether the step is a micro-batch, and what a `refresh: auto` view chooses by."""
    return {table: runtime.storage.touched_rows(runtime.relations[table].path,
                                                before[table].version,
                                                runtime.relations[table].version)
            for table in tables}


def _total(rows: Iterable[int | None]) -> int | None:
    """The sum, or None when any is unknown."""
    counted = list(rows)
    return None if None in counted else sum(count for count in counted if count is not None)


def table_change(runtime: PipelineRuntime, before: RelationRecord,
                 after: RelationRecord) -> ZSet:
    """A table's change in this step, read from the data files that differ between the two
    versions: ingestion and INSERT only add files (their rows are the change); a DELETE, a
    changes connector or a compaction also replace some, and then the change is those
    files' rows compared (a multiset difference over the touched files, not the table).
    A table with Delta's change data feed (Delta's writer marks deleted rows in deletion
    vectors, leaving the files as they were) reads its change from the feed."""
    inserts, deletes, _ = runtime.storage.change_since(
        after.path, before.version, after.version, runtime.schema_of(after),
        runtime.schema_of(before), nets=True)
    if deletes is None:  # files were only added: their rows are the change
        return ZSet(inserts=inserts)
    # Computed once (as small as the deletion), not by each view that reads the table.
    return ZSet(inserts=inserts, deletes=deletes).net()
