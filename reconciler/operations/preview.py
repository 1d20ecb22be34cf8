"""`reconcile plan --preview`: what a plan's apply would do to the views' rows.

The plan says which views an apply computes (new ones, modified ones, and the ones
downstream that it recomputes); the preview runs those queries on Spark over the
committed state at the manifest's versions and counts the difference with what
each view holds now (`engine/preview/counts.py`). It is read-only by construction: no lock
is taken, nothing is written under storage, no Delta version moves, and a step
committed meanwhile does not change it (the versions are the manifest's).

The result is attached to each pipeline of the plan as a `plan.preview_report.PipelinePreview`,
written out under `preview` (left out of `plan_id`, as it describes the data, not the plan):

    {"format": 1, "base_serial": 7,
     "views": {"avg_grade": {"kind": "modified", "rows_before": 120, "rows_after": 118,
                             "added": 3, "removed": 5, "key": ["student_id", "class"],
                             "changed": 12, "changed_values": {"class_avg": 12}}}}

A new view has `rows_after` and `nulls` per column; a view that cannot be previewed
has `unavailable` and the reason.
"""

from __future__ import annotations

from contextlib import ExitStack
from pathlib import Path
from typing import Any

from reconciler.desired.analysis.output_key import output_key
from reconciler.desired.model.masking import masked_columns
from reconciler.desired.model.program import Program
from reconciler.desired.settings.project import Project, settings_summary
from reconciler.desired.workspace import load_programs
from reconciler.plan.artifact import Plan
from reconciler.plan.document import PipelinePlan, plan_pipeline
from reconciler.plan.preview_report import PipelinePreview
from reconciler.state.manifest import Manifest
from reconciler.state.reader import open_backend, pipeline_layout, read_manifest
from reconciler.support.errors import ReconcileError


def preview_plan(plan: Plan, project: Project, programs: list[Program],
                 backend_url: str | None, engine: Any, mode: str = "counts") -> Plan:
    """`plan` with a `preview` attached to every pipeline that computes a view
    (`programs` and `project` as planned: the Action's carry its trusted settings); with
    `mode` rows, sample rows as reconcile.yaml's `preview` says (count, masked columns).

    The manifest is read again (the plan is recomputed from it, without a JVM, for the
    views and their kinds): it must be the one the plan was made against, or the preview
    would describe another change than the plan shows."""
    backend = open_backend(project, backend_url)
    previews: dict[str, PipelinePreview] = {}
    with ExitStack() as stack:
        bound = _Bound(stack, project, engine)
        for program in programs:
            manifest, etag = read_manifest(backend, program.pipeline,
                                           pipeline_layout(project, program.pipeline))
            entry = plan.pipeline(program.pipeline)
            if entry is None:
                continue
            if (entry.base.etag if entry.base else None) != (etag if manifest else None):
                raise ReconcileError(f"pipeline {program.pipeline}: its state moved on while "
                                     "it was planned (a step or an apply committed); plan again")
            again = plan_pipeline(program, manifest, etag, settings_summary(project.settings))
            views = computed_views(again)
            if views:
                previews[program.pipeline] = _previewed(
                    project, again, views, manifest, engine, bound, mode)
    return plan.with_previews(previews)


def _previewed(project: Project, plan: PipelinePlan, views: list[tuple[str, str]],
               manifest: Manifest | None, engine: Any, bound: _Bound, mode: str
               ) -> PipelinePreview:
    """One pipeline's `preview` entry: its computed views' counts (and samples), masked by
    lineage, under the bound shared by the whole preview."""
    from reconciler.engine.preview.counts import Samples, preview_views  # Spark: --preview

    program = plan.diff.program
    runtime = engine.runtime(plan.name, program, manifest.relations if manifest else {})
    settings = project.settings.preview
    samples = Samples(settings.samples if mode == "rows" else 0,
                      masked_columns(plan.diff.new, settings.mask) if mode == "rows" else {})
    primary_keys = {name: list(table.primary_key) for name, table in program.tables.items()}
    return PipelinePreview(preview_views(runtime, views, {
        view: output_key(program.views[view].sql, primary_keys) for view, _ in views},
        _unavailable(project, plan), bound.get(), samples),
        manifest.serial if manifest else None)


class _Bound:
    """The preview's time limit and job budget (`engine.preview.bound`), made when the first
    view is about to run: its clock starts once Spark has, not while the JVM starts."""

    def __init__(self, stack: ExitStack, project: Project, engine: Any) -> None:
        self.stack, self.project, self.engine = stack, project, engine
        self.bound: Any = None

    def get(self) -> Any:
        if self.bound is None:
            from reconciler.engine.preview.bound import PreviewBound  # Spark: --preview

            settings = self.project.settings.preview
            self.bound = self.stack.enter_context(PreviewBound(
                self.engine.spark, settings.timeout_seconds, settings.max_jobs))
        return self.bound


def preview_checkout(plan: Plan, project_dir: Path, pipeline: str | None,
                     backend_url: str | None, mode: str, debug: bool) -> Plan:
    """`reconcile plan --preview`: the checkout's own project and settings."""
    from reconciler.operations.engine import Engine

    project, programs = load_programs(project_dir, pipeline)
    return preview_plan(plan, project, programs, backend_url, Engine(project, debug=debug),
                        mode)


def computed_views(plan: PipelinePlan) -> list[tuple[str, str]]:
    """(view, new | modified | downstream) for each view the apply computes, in the
    program's dependency order: modified when its own query changed, downstream when
    only what it reads did (the diff calls both modified: fingerprints chain)."""
    actions = {action.name: action.action for action in plan.actions if action.kind == "view"}
    program = plan.diff.program
    views = []
    for name in program.order or program.views:
        if name not in program.views:
            continue
        if actions.get(name) == "create" or plan.diff.views.get(name) == "added":
            views.append((name, "new"))
        elif actions.get(name) == "recompute":
            before = plan.diff.old["views"].get(name, {}).get("query")
            own = before is not None and before != program.views[name].query
            views.append((name, "modified" if own else "downstream"))
    return views


def _unavailable(project: Project, plan: PipelinePlan) -> dict[str, str]:
    """Relations whose rows after the apply the preview cannot read from committed state."""
    reasons = {name: "table changes: its rows after the apply depend on the evolution"
               for name, change in plan.diff.tables.items() if change == "modified"}
    reasons.update({new: f"renamed from {old}" for new, old in plan.diff.renamed.items()})
    return reasons
