"""Refresh a step's views, two at once, each after the views it reads.

A maintained view's refresh is a chain of small Spark jobs and Delta commits
over a change of a few thousand rows: much of its time is per-job latency
(planning, scheduling, the commit) rather than work. Views that do not read each
other are independent, so `REFRESH_WORKERS` are refreshed side by side: Spark
runs jobs from several threads at once, as a shared cluster does. A view starts
once every view it reads is done (the dependency graph, `graphlib`), so it reads
their changes and new versions exactly as in a serial step. Two, because on a
2-core machine the jobs' fixed costs are CPU too: refreshing TPC-H's views for
one RF1 slice at scale 1 took 74.8 s one at a time, 65.9 s two at a time, 68.7
and 74.8 s four at a time (one run each, the same state restored each time).

A `refresh: auto` view is maintained or recomputed as `engine.maintenance.refresh_choice` decides
from the step's `touched` rows per table; its time is kept for the next choice.

A failure stops new refreshes; those running finish (each is its own Delta
commits, none visible until the manifest commits), then the error is raised.
An error of the view's own SQL on this step's rows (a division by zero, a cast
that overflows) is one line naming the view (`ObjectFailed`, whose public form
keeps only the error's class); Spark running out of resources is left to the
CLI's `engine_failure`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from graphlib import TopologicalSorter

from pyspark.errors import PySparkException

from reconciler.desired.analysis.shapes import Aggregate, Shape
from reconciler.engine.expectations import check_view
from reconciler.engine.maintenance.frames import StepFrames
from reconciler.engine.maintenance.refresh_choice import (
    Choice,
    change_share,
    choose,
    input_tables,
    maintained_fixed_cost,
    timed,
)
from reconciler.engine.maintenance.view import maintained_shape, recompute_update, refresh_update
from reconciler.engine.maintenance.writes import refresh_with
from reconciler.engine.maintenance.zset import ZSet
from reconciler.engine.runtime import PipelineRuntime
from reconciler.engine.spark.failures import engine_failure
from reconciler.support.errors import ObjectFailed

REFRESH_WORKERS = 2
"""Views refreshed at once (threads of the driver; their Spark jobs share the cluster)."""


def refresh_views(runtime: PipelineRuntime, frames: StepFrames,
                  emit: Callable[[str, ZSet], None], touched: dict[str, int | None],
                  output: Collection[str], workers: int = REFRESH_WORKERS,
                  only: Collection[str] | None = None) -> list[str]:
    """Refresh every view that reads a changed relation (its change goes to `frames` and
    to `emit`); returns them in program order. `touched`: the rows each changed table's
    change touched, from its log (`DeltaStorage.touched_rows`, for `refresh: auto`).
    `output`: the relations an output connector sends. `only`: refresh none but these (a
    promotion catches up its views alone: `engine.promotion`)."""
    views = runtime.program.views
    consumed = {relation for definition in views.values() for relation in definition.reads}
    consumed |= set(output)  # the others' changes stay lazy
    reads = {name: [read for read in views[name].reads if read in views] for name in views}
    chain = _longest_chains(reads)
    graph = TopologicalSorter(reads)
    graph.prepare()
    refreshed: set[str] = set()

    def refresh(view: str) -> None:
        runtime.report("refresh", view)
        try:
            checked = bool(views[view].expectations)  # counted on its change
            totals = runtime.relations[view].expectations or {}
            change_read = view in consumed or checked
            shape = maintained_shape(runtime, view)  # analysed once: the rule and the checks
            if views[view].refresh == "auto":
                change = _refresh_chosen(runtime, frames, view, shape, touched, change_read)
            else:
                change = refresh_with(runtime, view,
                                      refresh_update(runtime, frames, view, shape),
                                      change_read=change_read)
            if checked:
                check_view(runtime, frames, view, change, shape=shape, totals=totals)
            if not change.is_empty:
                frames.changes[view] = change
                emit(view, change)
        except PySparkException as error:  # Spark's: keep which view (as a bootstrap does)
            if engine_failure(error, None) is not None:
                raise
            raise ObjectFailed("view", view, error) from error
        runtime.report("refreshed", view)

    running: dict[Future[None], str] = {}
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="refresh") as pool:
        while graph.is_active():
            for view in sorted(graph.get_ready(), key=lambda name: -chain[name]):
                if (only is None or view in only) and any(
                        read in frames.changes for read in views[view].reads):
                    running[pool.submit(refresh, view)] = view
                    refreshed.add(view)
                else:
                    graph.done(view)
            if not running:
                continue
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                view = running.pop(future)
                future.result()  # a failure: the pool waits for the others, then it raises
                graph.done(view)
    return [name for name in runtime.program.order if name in refreshed]


def _longest_chains(reads: dict[str, list[str]]) -> dict[str, int]:
    """For each view, the most views refreshed one after another from it (itself and the
    longest line of views reading it). The ready view heading the longest line is started
    first: the step bench's aggregate, read by another view, waited behind a filter view
    for a worker, and the line of the two is the step's critical path."""
    chain: dict[str, int] = {}
    readers: dict[str, list[str]] = {name: [] for name in reads}
    for name, sources in reads.items():
        for source in sources:
            readers[source].append(name)
    for name in reversed(list(TopologicalSorter(reads).static_order())):
        chain[name] = 1 + max((chain[reader] for reader in readers[name]), default=0)
    return chain


def _refresh_chosen(runtime: PipelineRuntime, frames: StepFrames, view: str,
                    shape: Shape | None, touched: dict[str, int | None],
                    change_read: bool) -> ZSet:
    """Maintain or recompute a `refresh: auto` view, as `choose` says; its time recorded."""
    tables = input_tables(runtime.program, view)
    record = runtime.relations[view]
    choice: Choice = choose(
        change_share(tables, touched, {table: runtime.relations[table].rows
                                       for table in tables}),
        record.timings,
        maintained_fixed_cost([other.timings for other in list(runtime.relations.values())],
                              runtime.storage.writer.maintained_refresh_seconds),
        restarts=isinstance(shape, Aggregate) and record.state is None)
    started = time.monotonic()
    update = (recompute_update(runtime, frames, view, None) if choice.recompute
              else refresh_update(runtime, frames, view, shape))
    change = refresh_with(runtime, view, update, change_read=change_read)
    seconds = time.monotonic() - started
    # Maintaining an aggregate whose state an earlier recompute dropped starts that state:
    # a recompute and more, not what maintaining it costs, so it times neither way (kept,
    # it would make the recompute look cheaper ever after).
    restarted = (not choice.recompute and record.state is None
                 and runtime.relations[view].state is not None)
    timings = record.timings if restarted else timed(
        record.timings, recompute=choice.recompute, seconds=seconds, share=choice.share)
    runtime.relations[view] = replace(runtime.relations[view], timings=timings)
    runtime.refresh_choices[view] = choice.describe() + ("; its state started again"
                                                         if restarted else "")
    return change
