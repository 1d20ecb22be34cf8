"""What a view's refresh writes, decided before anything is written, and the one place
that writes it.

A rule (`view.refresh_update`, `view.recompute_update`) only reads: it returns the view's new
contents or its change, and a maintained aggregate's new state or its state's change,
as DataFrames pinned to the versions the step read. `write_update` then makes the
commits, always in the same order, so what a refresh costs and where it can stop
half-way are in one function rather than spread over the rules (`refresh_with` also
gives a step the view's change):

    Recomputed   the view replaced whole; then its state, when it is a maintained aggregate
    Changed      the view's change merged in; then its state's change, when it has state
    Rewritten    a small (or windowed) aggregate's state replaced whole; then the view, from it

Between a view's two commits sits the crash point `aggregate-between-writes`: a crash
there leaves Delta versions that no manifest names, and the next step starts again from
the committed ones.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import DataFrame

from reconciler.engine.maintenance.zset import ZSet
from reconciler.engine.runtime import PipelineRuntime
from reconciler.support.faults import crash_point


@dataclass(frozen=True)
class Recomputed:
    """The view's whole contents, and the per-group state a maintained aggregate starts
    from (None: the view keeps no state)."""

    contents: DataFrame
    state: DataFrame | None = None


@dataclass(frozen=True)
class StateChange:
    """A large aggregate's touched groups: their new state rows and their old ones."""

    inserts: DataFrame
    deletes: DataFrame
    unique_by: list[str]


@dataclass(frozen=True)
class Changed:
    """The view's net change (empty: nothing is written for it) and, for an aggregate, its
    state's change."""

    change: ZSet
    state: StateChange | None = None


@dataclass(frozen=True)
class Rewritten:
    """A small aggregate's new state (or one with windows over its groups), and how its rows
    follow from a state: they are computed from the state as written, read back, so the
    state is computed once (one job writes it, one writes the view)."""

    state: DataFrame
    rows: Callable[[DataFrame], DataFrame]


Update = Recomputed | Changed | Rewritten


def refresh_with(runtime: PipelineRuntime, view: str, update: Update, *,
                 change_read: bool = True) -> ZSet:
    """Write a step's `update` to `view`; returns the view's change: the rule's own, or the
    stored contents before against after (computed when `change_read`, else left lazy:
    nothing reads it)."""
    if isinstance(update, Changed):
        write_update(runtime, view, update)
        return update.change
    before = runtime.frame(view)  # a step refreshes views the committed state holds
    write_update(runtime, view, update)
    after = runtime.frame(view)
    return ZSet.between(before, after) if change_read else ZSet.pending(before, after)


def write_update(runtime: PipelineRuntime, view: str, update: Update) -> None:
    """Make `update`'s commits to `view`'s contents and state, in their fixed order."""
    if isinstance(update, Changed):
        _write_change(runtime, view, update)
    elif isinstance(update, Recomputed):
        write_recomputed(runtime, view, update)
    else:
        runtime.pin(view, runtime.state(view).overwrite(update.state))
        crash_point("aggregate-between-writes")  # the state moved on, the view did not
        # A small view (`Rewritten`: only those), replaced whole
        runtime.pin(view, runtime.relation(view).replace_small(
            update.rows(runtime.state_frame(view))))


def write_recomputed(runtime: PipelineRuntime, view: str, update: Recomputed) -> float:
    """Write a recomputed view, then the state it starts; returns the seconds its contents
    took, what `refresh: full` pays for the view (a bootstrap's first timing of a
    `refresh: auto` view: starting its state is not part of a recompute's cost, and counted
    in it made the recompute look dearer than maintaining, for good)."""
    started = time.monotonic()
    runtime.write_view(view, update.contents)
    seconds = time.monotonic() - started
    if update.state is not None:
        runtime.write_state(view, update.state)
    return seconds


def _write_change(runtime: PipelineRuntime, view: str, update: Changed) -> None:
    """The view's change merged into its contents, then its state's into the state."""
    change = update.change
    if not change.is_empty:  # an aggregate's groups may change inside, not in what it shows
        runtime.pin(view, runtime.relation(view).apply_changes(
            change.inserts, change.deletes, steady_source=True))
    if update.state is not None:
        crash_point("aggregate-between-writes")  # the view moved on, its state did not
        runtime.pin(view, runtime.state(view).apply_changes(
            update.state.inserts, update.state.deletes, unique_by=update.state.unique_by,
            steady_source=True))
