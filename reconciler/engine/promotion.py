"""Promotion: an apply adopts the views a pull-request environment computed, then catches them
up to production's current state by incremental maintenance instead of recomputing them.

An environment (`operations.environments`) computed the change's views over production's
state at its base serial: each view's contents and, for a maintained aggregate, its
per-group state. Production has stepped since: its tables (and the views the change leaves
alone) moved from the versions the base serial pins to the ones the current manifest pins.
For each promoted view, in dependency order, the bootstrap (`engine.bootstrap.recompute`,
through its `ComputedElsewhere` hook) calls `Promotion.compute`, which

1. writes the environment's contents (and state) as the view's new production version
   (the copy costs the view's size, not its inputs'); then
2. refreshes that view alone (`engine.refresh.refresh_views` with `only`) over the change
   of what it reads between the two states: each input's Delta change from its base version
   to its current one, and for a promoted view it reads, the change that view's own
   catch-up made. A view no rule maintains is recomputed there, as a step would.

The result equals recomputing the view over the current state (the maintenance oracle's
claim for a step, here for the steps since the base serial taken as one). Nothing commits
here: the apply's manifest does, and until then production's records pin the old versions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from pyspark.sql import DataFrame

from reconciler.engine.maintenance.frames import StepFrames
from reconciler.engine.maintenance.zset import ZSet
from reconciler.engine.refresh import refresh_views
from reconciler.engine.runtime import PipelineRuntime
from reconciler.engine.spark.micro_batch import micro_batch
from reconciler.engine.step import table_change
from reconciler.state.relations import RelationRecord


@dataclass
class Promotion:
    """The views to take from an environment (`views`: its records of them) and production's
    relations as they were at the environment's base serial (`base`)."""

    views: Mapping[str, RelationRecord]
    base: Mapping[str, RelationRecord]
    environment: str  # its name, for what the apply says
    _frames: StepFrames | None = field(default=None, init=False)
    _adopted: dict[str, RelationRecord] = field(default_factory=dict, init=False)
    _touched: dict[str, int | None] = field(default_factory=dict, init=False)

    def compute(self, runtime: PipelineRuntime, view: str) -> None:
        """Adopt `view` from the environment, then catch it up to the current state."""
        self._adopt(runtime, view)
        frames = self._frames or self._start(runtime)
        # Planned as a step's is: statically when the change since the base serial is small.
        touched = None if None in self._touched.values() else sum(
            rows for rows in self._touched.values() if rows is not None)
        with micro_batch(runtime.spark, touched):
            refresh_views(runtime, frames, _no_output, self._touched, output=(), only={view})

    def close(self) -> None:
        if self._frames is not None:
            self._frames.close()

    def _adopt(self, runtime: PipelineRuntime, view: str) -> None:
        """The environment's contents and state of `view` as its new production version."""
        computed = self.views[view]
        runtime.write_view(view, runtime.frame_of(computed))
        if computed.state is not None:
            runtime.write_state(view, runtime.frame_of(computed.state))
        runtime.relations[view] = replace(runtime.relations[view], timings=computed.timings,
                                          expectations=computed.expectations)
        self._adopted[view] = runtime.relations[view]

    def _start(self, runtime: PipelineRuntime) -> StepFrames:
        """The frames of the catch-up: old is the base serial's state (a promoted view's,
        as adopted), new the current one; the change of every relation the promoted views
        read that moved since the base serial."""
        frames = StepFrames(runtime.spark, old=lambda name: self._old(runtime, name),
                            new=runtime.frame)
        read = {source for view in self.views for source in runtime.program.views[view].reads}
        for name in sorted(read - set(self.views)):
            before, now = self.base.get(name), runtime.relations.get(name)
            if before is None or now is None or before.version == now.version:
                continue
            frames.changes[name] = table_change(runtime, before, now)
            if name in runtime.program.tables:
                self._touched[name] = runtime.storage.touched_rows(now.path, before.version,
                                                                   now.version)
        self._frames = frames
        return frames

    def _old(self, runtime: PipelineRuntime, name: str) -> DataFrame:
        if name in self._adopted:
            return runtime.frame_of(self._adopted[name])
        if name in self.base:
            return runtime.frame_of(self.base[name])
        return runtime.frame(name)  # a table the change adds: empty then and now


def _no_output(_view: str, _change: ZSet) -> None:
    """A catch-up sends nothing: the bootstrap sends each view's net change once it is done."""
