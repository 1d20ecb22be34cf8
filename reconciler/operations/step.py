"""One step of a deployed pipeline: ingest new input, refresh views, emit, commit.

`reconcile run` (and its continuous runner), `execute` and `query` all step through
`run_pipeline`, under the pipeline's lock, on the program the manifest committed.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from reconciler.desired.settings.connector_options import check_committed_options
from reconciler.desired.settings.project import Project
from reconciler.engine.approval import check_approval
from reconciler.engine.step import StepResult, has_pending_input, missing_inputs, run_step
from reconciler.operations.commit import collect_garbage, commit_manifest
from reconciler.operations.drift import settle_drift
from reconciler.operations.engine import Engine
from reconciler.operations.outcome import Outcome, OutcomeKind
from reconciler.operations.publication import publish_committed, publish_setting, published_in
from reconciler.state.manifest import Status
from reconciler.state.reader import committed_program, pipeline_layout, read_manifest
from reconciler.support.errors import PipelinePaused, ReconcileError
from reconciler.support.faults import crash_point
from state_backends import StateBackend


def run_pipeline(project: Project, backend: StateBackend, engine: Engine, name: str, *,
                 insert: Callable[[Any], None] | None = None) -> tuple[Outcome, StepResult]:
    """One step, under the pipeline's lock; starts Spark only when there is work.

    `insert` (used by `execute`) writes into a table; that step then refreshes views
    without ingesting, so an uncommitted insert is never mixed with ingested batches
    (see `discard_uncommitted_inserts`).
    """
    with backend.locked(name, "run"):
        manifest, etag = read_manifest(backend, name, pipeline_layout(project, name))
        if manifest is None:
            raise ReconcileError(f"pipeline '{name}' is not deployed: run `reconcile apply`")
        if manifest.status != Status.RUNNING:
            raise PipelinePaused(f"pipeline '{name}' is {manifest.status}, not Running: "
                                 "finish it with `reconcile apply` or `reconcile approve`")
        program = committed_program(backend, manifest)  # the state bucket is not code
        check_approval(pipeline_layout(project, name), manifest.lineage, manifest.serial,
                       manifest.program)  # nor does it decide where data goes
        if insert is None:  # the settings may have withdrawn what the apply allowed
            check_committed_options(name, program.document, project.settings.allow_file_cleanup)
        settled, adopted = settle_drift(project, engine, manifest)
        if settled is not manifest:  # restored: pinned at once, so it is undone only once
            manifest = settled.next()
            etag = commit_manifest(project, backend, manifest, etag, engine)
        if insert is None and not adopted and not has_pending_input(
                program, manifest.relations, manifest.connectors, project.root):
            said = [f"{name}: no new input", *missing_inputs(program, project.root)]
            return Outcome(name, OutcomeKind.IDLE, "; ".join(said), manifest.serial), StepResult()
        started = time.monotonic()
        runtime = engine.runtime(name, program, manifest.relations)
        step = run_step(runtime, manifest.connectors, serial=manifest.serial + 1,
                        ingest_inputs=insert is None,
                        after_discard=insert)
        held = {"bad_input": step.bad_input} if step.bad_input else {}
        if not step.has_changes:
            if held:
                return Outcome(name, OutcomeKind.INPUT_FAILED, "; ".join(step.bad_input.values()),
                               manifest.serial, details=held), step
            return Outcome(name, OutcomeKind.IDLE, f"{name}: no new input", manifest.serial), step
        crash_point("step-before-commit")
        seconds = time.monotonic() - started
        rows = {table: (runtime.relations[table].rows or 0)
                - (manifest.relations[table].rows or 0) for table in step.changed_tables}
        setting = publish_setting(project, name)
        committed = manifest.next(relations=runtime.relations, connectors=step.connectors,
                                  published=published_in(setting), last_step={
            "ingested": step.ingested, "changed_tables": step.changed_tables,
            "refreshed": step.refreshed, "emitted": step.emitted,
            "seconds": round(seconds, 3), "rows": rows,
            **({"expectations": runtime.expectation_counts} if runtime.expectation_counts
               else {}),
            **({"choices": runtime.refresh_choices} if runtime.refresh_choices else {})})
        commit_manifest(project, backend, committed, etag, engine)
        publish_committed(engine, committed, program.document, setting,
                          previous=manifest.published)
        if committed.serial % project.settings.retention.every == 0:
            collect_garbage(project, backend, name)
        return Outcome(name, OutcomeKind.STEPPED,
                       f"{name}: step committed (serial {committed.serial}) in {seconds:.1f}s; "
                       f"rows {', '.join(f'{t} {n:+d}' for t, n in rows.items())}; refreshed "
                       f"{', '.join(step.refreshed) or 'no views'}"
                       + "".join(f"; {view} {described}" for view, described
                                 in sorted(runtime.refresh_choices.items())), committed.serial,
                       details={"seconds": seconds, "rows": rows, **held}), step
