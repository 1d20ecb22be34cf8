"""Bootstrapping: bring a pipeline's state from its committed program to the desired one.

Follows Feldera's semantics on Spark + Delta, then goes further: state of removed
relations is discarded; a renamed relation keeps its state under its new name; a
modified table evolves in place when `desired.model.table_evolution` allows it (rows and
connector offsets kept), otherwise it is truncated and its input connectors
reset; new tables are created empty; new and modified views are computed, in
dependency order, from the existing state of unchanged relations (a maintained
aggregate view starts its per-group state too). No input is ingested. Unchanged
views are neither recomputed nor re-emitted: their Delta versions stay the same.

Unlike Feldera, which sends a bootstrapped view in full (sinks must be cleared
first), an output connector that already follows the view receives only the
net change: old contents (the pinned Delta version) against new, as `_op`
delete/insert rows, so its changelog keeps integrating to the view. An output
that is new or reset, one whose view's columns changed, or one that says
`snapshot_on_bootstrap: true`, receives the full contents as a snapshot.

Nothing here commits: the caller writes the returned state into a new manifest,
the only commit point. Until then the previous manifest pins the old versions.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from typing import Protocol

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from reconciler.engine.bootstrap.evolution import evolve_table
from reconciler.engine.bootstrap.state_moves import move_relation
from reconciler.engine.expectations import check_view
from reconciler.engine.io.connector_types import connector_type
from reconciler.engine.io.connectors import emit, outputs_by_relation
from reconciler.engine.maintenance.frames import StepFrames
from reconciler.engine.maintenance.refresh_choice import timed
from reconciler.engine.maintenance.view import maintained_shape, recompute_update
from reconciler.engine.maintenance.writes import write_recomputed
from reconciler.engine.maintenance.zset import ZSet
from reconciler.engine.runtime import PipelineRuntime
from reconciler.plan.diff import ProgramDiff
from reconciler.state.connectors import ConnectorState
from reconciler.state.relations import RelationRecord
from reconciler.support.errors import ObjectFailed, ReconcileError
from reconciler.support.faults import crash_point


class ComputedElsewhere(Protocol):
    """Views whose new contents come from somewhere else than their query over the stored
    state: a pull-request environment's, promoted (`engine.promotion`). `compute` writes the
    view as recomputing it would (its record in `runtime.relations`), in dependency order."""

    @property
    def views(self) -> Collection[str]: ...

    def compute(self, runtime: PipelineRuntime, view: str) -> None: ...


@dataclass
class BootstrapResult:
    relations: dict[str, RelationRecord]
    connectors: dict[str, ConnectorState]
    recomputed: list[str] = field(default_factory=list)
    promoted: list[str] = field(default_factory=list)  # from `ComputedElsewhere`
    created_tables: list[str] = field(default_factory=list)
    evolved_tables: list[str] = field(default_factory=list)
    renamed: dict[str, str] = field(default_factory=dict)
    emitted: dict[str, int] = field(default_factory=dict)


def connector_states(runtime: PipelineRuntime, diff: ProgramDiff,
                     previous: dict[str, ConnectorState]) -> dict[str, ConnectorState]:
    """Input connectors keep their checkpoint unless they or their table changed."""
    states: dict[str, ConnectorState] = {}
    for name, connector in runtime.connectors.items():
        if not connector.is_input:
            states[name] = ConnectorState()
            continue
        before = previous.get(name)
        reset = (before is None or diff.connectors[name] != "unchanged"
                 or not diff.keeps_rows(connector.relation))
        if before is not None and not reset:
            states[name] = before.copy_for_step()  # offsets (checkpoint, source_version) carry over
            continue
        # A new id, never a counter: a retried bootstrap or a re-added connector must not
        # find the checkpoint or the app transactions of an attempt that never committed.
        generation = uuid.uuid4().hex[:12]
        states[name] = ConnectorState(
            generation=generation, checkpoint=runtime.layout.checkpoint(name, generation),
            kafka_offsets=connector_type(connector).start(connector))
    return states


def bootstrap(runtime: PipelineRuntime, diff: ProgramDiff,
              previous_connectors: dict[str, ConnectorState], *, serial: int,
              silent: bool = False, elsewhere: ComputedElsewhere | None = None
              ) -> BootstrapResult:
    """Compute the desired state; `runtime.relations` starts as the committed state and
    `runtime.connectors` are the desired program's. The views of `elsewhere` are taken from
    it instead of computed (sent to outputs, and their expectations checked, all the same)."""
    relations = runtime.relations
    result = BootstrapResult(relations=relations, connectors={})
    # What outputs compare against: each relation as the committed manifest pins it.
    committed = dict(relations)  # records are frozen: as the committed manifest pins them
    committed.update({new: committed[old] for new, old in diff.renamed.items()
                      if old in committed})
    for new, old in diff.renamed.items():
        runtime.report("rename", f"{old} -> {new}")
        move_relation(runtime, old, new)
        result.renamed[new] = old
    for section in ("tables", "views"):
        for name, change in getattr(diff, section).items():
            if change == "removed":
                relations.pop(name, None)
    for name, change in diff.tables.items():
        evolved = diff.evolutions.get(name)
        if evolved is not None and evolved.possible:
            runtime.report("evolve table", name)
            evolve_table(runtime, name, evolved)
            result.evolved_tables.append(name)
        elif change in ("added", "modified"):
            runtime.report("create table", name)
            runtime.create_table(name)
            result.created_tables.append(name)
    result.connectors = connector_states(runtime, diff, previous_connectors)
    outputs = outputs_by_relation(runtime.connectors)
    frames = StepFrames(runtime.spark, old=runtime.frame, new=runtime.frame)
    try:
        _compute(runtime, diff, frames, result, outputs, committed, serial, silent,
                 elsewhere)
    finally:
        frames.close()
    return result


def _compute(runtime: PipelineRuntime, diff: ProgramDiff, frames: StepFrames,
             result: BootstrapResult, outputs: dict[str, list[str]],
             committed: dict[str, RelationRecord], serial: int, silent: bool,
             elsewhere: ComputedElsewhere | None) -> None:
    """New and modified views from the state as it stands, sent to their outputs."""
    for name in runtime.program.order:
        before = committed.get(name)
        if diff.views.get(name) in ("added", "modified"):
            promoted = elsewhere is not None and name in elsewhere.views
            runtime.report("promote view" if promoted else "compute view", name)
            try:
                if elsewhere is not None and promoted:
                    elsewhere.compute(runtime, name)
                    result.promoted.append(name)
                else:
                    seconds = write_recomputed(runtime, name, recompute_update(
                        runtime, frames, name, maintained_shape(runtime, name)))
                    if runtime.program.views[name].refresh == "auto":  # its first timing
                        runtime.relations[name] = replace(
                            runtime.relations[name],
                            timings=timed(None, recompute=True, seconds=seconds))
                if runtime.program.views[name].expectations:  # its change: every row
                    check_view(runtime, frames, name, ZSet(inserts=runtime.frame(name)))
            except ReconcileError:
                raise
            except Exception as error:  # Spark's: keep which view, and its class apart
                raise ObjectFailed("view", name, error) from error
            if not promoted:
                result.recomputed.append(name)
            crash_point(f"bootstrap-after-view:{name}")
        elif name not in (*result.created_tables, *result.evolved_tables):
            continue
        if silent or not outputs.get(name):
            continue
        contents = runtime.frame(name)  # a truncated table's: empty
        change = _net_change(runtime, before, contents)
        for connector in outputs[name]:
            snapshot = (change is None or diff.connectors[connector] != "unchanged"
                        or runtime.connectors[connector].snapshot_on_bootstrap)
            rows = contents if snapshot else (change.changes() if change else None)
            # Counted already: a snapshot's rows by the log, a change's as it was netted.
            counted = runtime.relations[name].rows if snapshot else (
                change.rows if change else None)
            if rows is not None:
                result.emitted[connector] = emit(runtime, runtime.connectors[connector], rows,
                                                 serial, snapshot=snapshot, rows=counted)


def _net_change(runtime: PipelineRuntime, before: RelationRecord | None,
                contents: DataFrame) -> ZSet | None:
    """Old contents (as the committed manifest pins them) against new; None when there is no
    old version or its columns differ (a reader of the changelog must start over)."""
    if before is None or _columns(runtime.schema_of(before)) != _columns(contents.schema):
        return None
    return ZSet.between(runtime.frame_of(before), contents)


def _columns(schema: StructType) -> list[tuple[str, str]]:
    """Names and types (nullability aside: it does not change a row)."""
    return [(field.name, field.dataType.simpleString()) for field in schema.fields]
