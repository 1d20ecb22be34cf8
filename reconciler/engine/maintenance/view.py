"""What refreshes one view in a step: its Z-set rule's change, or its contents recomputed.

Only reads: the result (`writes.Update`) is written by `writes.write_update`.

The mode comes from the committed program (`refresh` of each view, decided at
plan time by `desired.analysis.shapes`), so a step does what the approved plan said.
A maintained aggregate without state (a manifest from before it was
maintained) is recomputed once and its state started. A MIN/MAX view whose
source may delete rows this step, and a COUNT(DISTINCT) view at every step, are
refreshed by their touched groups, recomputed (`aggregate._regrouped`), never by
rewriting their state with the contributions.

Each Spark job costs a few tenths of a second whatever its rows (planning,
code generation, scheduling, the write's commit protocol), so a refresh is
counted in jobs. An aggregate whose state and contents are small
(`SMALL_AGGREGATE_BYTES`) is refreshed in two (`aggregate.aggregate_update`): one
reads the state whole, adds the change's contributions and writes the new state;
one writes the view from it. A larger one is refreshed by its change (the touched groups, their net
change, the files holding them: four or more jobs, but writes that follow the
change).
"""

from __future__ import annotations

from functools import cache, partial

from pyspark.sql.types import StructType

from reconciler.desired.analysis.keyed import Keyed
from reconciler.desired.analysis.shapes import Aggregate, Fallback, Shape, analyse
from reconciler.desired.parsing.expectation_clauses import executable_view_query
from reconciler.engine.maintenance.aggregate import aggregate_update, recomputed
from reconciler.engine.maintenance.change import change_of
from reconciler.engine.maintenance.frames import StepFrames
from reconciler.engine.maintenance.writes import Changed, Recomputed, Update
from reconciler.engine.maintenance.zset import ZSet, positional
from reconciler.engine.runtime import PipelineRuntime

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


def refresh_update(runtime: PipelineRuntime, frames: StepFrames, view: str,
                   shape: Shape | None) -> Update:
    """What brings `view` up to date with this step's changes (in `frames`), by the rule
    of its `shape` (`maintained_shape`, found once by the caller) or, without one, by
    recomputing it; nothing is written here (`writes.write_update` writes it)."""
    schema = runtime.schema(view)
    if shape is not None and not isinstance(shape, Aggregate):
        stored = runtime.frame(view) if isinstance(shape, Keyed) else None
        return Changed(_positional(change_of(frames, shape, stored), schema).net())
    if isinstance(shape, Aggregate) and runtime.relations[view].state is not None:
        return aggregate_update(frames, shape, runtime.state_frame(view), schema,
                                reads=runtime.program.views[view].reads,
                                small=partial(_is_small, runtime, view))
    return recompute_update(runtime, frames, view, shape)


def recompute_update(runtime: PipelineRuntime, frames: StepFrames, view: str,
                     shape: Shape | None) -> Recomputed:
    """`view` computed from scratch, and the state of a maintained aggregate started from
    its inputs as they stand (a STDDEV/VARIANCE one's rows are computed from that state,
    see `computed_from_state`). A bootstrap computes views so too (their old and new
    columns may differ: it compares nothing).

    `shape` None (`refresh: auto` chose to recompute): an aggregate starts no state
    (writing the view drops the old one), so the recompute costs what `refresh: full`'s
    does; the view's next maintained refresh finds no state and starts it, as after a mode
    change."""
    contents = runtime.evaluate(view)
    if isinstance(shape, Aggregate):
        return recomputed(frames, shape, contents)
    return Recomputed(contents)


def _is_small(runtime: PipelineRuntime, view: str) -> bool:
    record = runtime.relations[view]
    entries = (record, record.state) if record.state is not None else (record,)
    sizes = [runtime.storage.at(entry.path, entry.version).data_bytes() for entry in entries]
    return None not in sizes and sum(sizes) <= SMALL_AGGREGATE_BYTES  # type: ignore[arg-type]  # no None


def _positional(change: ZSet, schema: StructType) -> ZSet:
    """Both sides of a query's change with the view's stored column names and types."""
    return change.each_side(partial(positional, schema=schema))
