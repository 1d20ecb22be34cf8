"""Refresh one view in a step: apply its Z-set rule, or recompute it.

The mode comes from the committed program (`refresh` of each view, decided at
plan time by `desired.shapes`), so a step does what the approved plan said.
A maintained aggregate without state (a manifest from before it was
maintained) is recomputed once and its state started. A MIN/MAX view whose
source may delete rows this step, and a COUNT(DISTINCT) view at every step, are
refreshed by their touched groups, recomputed (`aggregate._regrouped`), never by
rewriting their state with the contributions.

Each Spark job costs a few tenths of a second whatever its rows (planning,
code generation, scheduling, the write's commit protocol), so a refresh is
counted in jobs. An aggregate whose state and contents are small
(`SMALL_AGGREGATE_BYTES`) is refreshed in two: one reads the state whole, adds
the change's contributions and writes the new state; one writes the view from
it. A larger one is refreshed by its change (the touched groups, their net
change, the files holding them: four or more jobs, but writes that follow the
change). A view's change is computed for the step only when a view or an
output reads it (`change_read`); otherwise it is left lazy.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache, partial

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from reconciler.desired.expectation_clauses import executable_view_query
from reconciler.desired.keyed import Keyed
from reconciler.desired.shapes import Aggregate, Fallback, Linear, Shape, analyse
from reconciler.engine.maintenance.aggregate import (
    aggregate_change,
    argument_types,
    computed_from_state,
    initial_state,
    keys_of,
    merged_state,
    output_rows,
    regroups,
    source_rows,
)
from reconciler.engine.maintenance.change import change_of
from reconciler.engine.maintenance.frames import StepFrames
from reconciler.engine.maintenance.zset import ZSet, positional
from reconciler.engine.runtime import PipelineRuntime
from reconciler.support.faults import crash_point

SMALL_AGGREGATE_BYTES = 4 * 1024 * 1024
"""State and contents of an aggregate view at most this big (together) are rewritten whole
each step: two jobs, and a step writes at most this much for the view."""


@cache
def _shape(statement_sql: str, columns: tuple[tuple[str, tuple[str, ...]], ...]
           ) -> Shape | None:
    try:
        return analyse(executable_view_query(statement_sql), dict(columns))
    except Fallback:
        return None


def maintained_shape(runtime: PipelineRuntime, view: str) -> Shape | None:
    """The shape a step maintains `view` by, or None when it is recomputed."""
    definition = runtime.program.views[view]
    if not definition.maintained:
        return None
    columns = tuple((read, tuple(runtime.schema(read).fieldNames()))
                    for read in definition.reads)
    return _shape(definition.sql, columns)


def refresh_view(runtime: PipelineRuntime, frames: StepFrames, view: str, *,
                 change_read: bool = True) -> ZSet:
    """Bring `view` up to date with this step's changes (in `frames`); returns its change
    (computed when `change_read`, else lazy)."""
    shape = maintained_shape(runtime, view)
    schema = runtime.schema(view)
    if shape is not None and not isinstance(shape, Aggregate):
        stored = runtime.frame(view) if isinstance(shape, Keyed) else None
        change = _positional(change_of(frames, shape, stored), schema).net()
        if not change.is_empty:
            runtime.apply_view_changes(view, change.inserts, change.deletes)
        return change
    state_table = runtime.relations[view].state
    if isinstance(shape, Aggregate) and state_table is not None:
        if not _regroups(runtime, frames, view, shape) and _is_small(runtime, view):
            return _rewrite_aggregate(runtime, frames, view, shape, schema, change_read)
        state = runtime.frame_of(state_table)
        changed = aggregate_change(frames, shape, state, schema)
        if changed is None:
            return ZSet()
        view_change, state_change = changed[0].net(), changed[1]  # state: computed
        if not view_change.is_empty:  # groups changed inside, not in what the view shows
            runtime.apply_view_changes(view, view_change.inserts, view_change.deletes)
        crash_point("aggregate-between-writes")  # the view moved on, its state did not
        assert state_change.inserts is not None and state_change.deletes is not None
        runtime.apply_state_changes(view, state_change.inserts, state_change.deletes,
                                    unique_by=keys_of(shape))
        return view_change
    return recompute_view(runtime, frames, view, change_read=change_read)


def recompute_view(runtime: PipelineRuntime, frames: StepFrames, view: str, *,
                   change_read: bool = True, keep_state: bool = True) -> ZSet:
    """Compute `view` from scratch (`write_from_scratch`); returns its change."""
    before = runtime.frame(view) if view in runtime.relations else None
    write_from_scratch(runtime, frames, view, keep_state=keep_state)
    return _change(before, runtime.frame(view), change_read)


def write_from_scratch(runtime: PipelineRuntime, frames: StepFrames, view: str, *,
                       keep_state: bool = True) -> None:
    """Compute `view` from scratch (and start its state when it is a maintained aggregate;
    a STDDEV/VARIANCE one's rows are computed from that state, see `computed_from_state`).
    A bootstrap computes views so too (their old and new columns may differ: it compares
    nothing).

    `keep_state=False` (`refresh: auto` chose to recompute): an aggregate's state is dropped
    instead, so the recompute costs what `refresh: full`'s does; the view's next maintained
    refresh finds no state and starts it, as after a mode change."""
    shape = maintained_shape(runtime, view) if keep_state else None
    if not keep_state and runtime.relations[view].state is not None:
        runtime.relations[view] = replace(runtime.relations[view], state=None)
    if isinstance(shape, Aggregate) and computed_from_state(shape):
        state = initial_state(frames, shape).localCheckpoint()  # read twice, computed once
        arguments = argument_types(source_rows(frames, shape))
        schema = runtime.evaluate(view).schema
        contents = output_rows(frames, shape, state, arguments, schema)
        runtime.write_view(view, contents)
        runtime.write_state(view, state)
    else:
        contents = runtime.evaluate(view)
        runtime.write_view(view, contents)
        if keep_state:
            _start_state(runtime, frames, view)


def _rewrite_aggregate(runtime: PipelineRuntime, frames: StepFrames, view: str,
                       shape: Aggregate, schema: StructType, change_read: bool) -> ZSet:
    """Refresh a small aggregate view in two jobs: its new state (the old one plus this step's
    contributions), then its contents from that state."""
    state_table = runtime.relations[view].state
    assert state_table is not None
    stored_state = runtime.frame_of(state_table)
    merged = merged_state(frames, shape, stored_state)
    if merged is None:
        return ZSet()
    state, arguments = merged
    before = runtime.frame(view)
    runtime.replace_state_contents(view, state)
    crash_point("aggregate-between-writes")  # the state moved on, the view did not
    state_table = runtime.relations[view].state
    assert state_table is not None
    new_state = runtime.frame_of(state_table)
    rows = output_rows(frames, shape, new_state, arguments, schema)
    runtime.replace_view_contents(view, rows)
    return _change(before, runtime.frame(view), change_read)


def _is_small(runtime: PipelineRuntime, view: str) -> bool:
    record = runtime.relations[view]
    entries = (record, record.state) if record.state is not None else (record,)
    sizes = [runtime.storage.at(entry.path, entry.version).data_bytes() for entry in entries]
    return None not in sizes and sum(sizes) <= SMALL_AGGREGATE_BYTES  # type: ignore[arg-type]  # no None


def _change(before: DataFrame | None, after: DataFrame, read: bool) -> ZSet:
    """The change from `before` to `after`: computed once if something reads it, else lazy."""
    return ZSet.between(before, after) if read else ZSet.pending(before, after)


def _start_state(runtime: PipelineRuntime, frames: StepFrames, view: str) -> None:
    """Compute a maintained aggregate view's per-group state from its inputs as they stand."""
    shape = maintained_shape(runtime, view)
    if isinstance(shape, Aggregate):
        state = initial_state(frames, shape)
        runtime.write_state(view, state)


def _positional(change: ZSet, schema: StructType) -> ZSet:
    """Both sides of a query's change with the view's stored column names and types."""
    return change.each_side(partial(positional, schema=schema))


def _regroups(runtime: PipelineRuntime, frames: StepFrames, view: str,
              shape: Aggregate) -> bool:
    """Whether this step recomputes the touched groups (`aggregate.regroups`: a
    COUNT(DISTINCT), or a MIN/MAX whose source may delete rows): then the state cannot be
    rewritten by adding contributions, and `aggregate_change` does it."""
    if not regroups(shape, deletes=True):
        return False
    if regroups(shape, deletes=False) or not isinstance(shape.source, Linear):
        return True  # keyed and derived sources retract rows
    reads = runtime.program.views[view].reads
    return any(frames.changes[read].deletes is not None for read in reads
               if read in frames.changes)
