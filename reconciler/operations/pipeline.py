"""What the commands do to one pipeline: apply, approve, run a step, execute, query.

Each operation holds the pipeline's lock, reads the committed manifest, works
on Delta state that no manifest points to yet, and ends by writing one new
manifest with compare-and-swap: the only commit point. A crash anywhere before
that write leaves the previous manifest in force; running the command again
converges to the same result.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.desired.connector_options import check_committed_options
from reconciler.desired.program import Program
from reconciler.desired.project import Project, settings_summary
from reconciler.engine.bootstrap.recompute import bootstrap
from reconciler.engine.step import StepResult, has_pending_input, missing_inputs, run_step
from reconciler.operations.engine import Engine
from reconciler.operations.publication import publish_committed, publish_setting
from reconciler.plan.diff import diff_programs
from reconciler.plan.document import PipelinePlan, Selection, desired_fingerprint, plan_pipeline
from reconciler.state.manifest import Manifest
from reconciler.state.program import CommittedProgram
from reconciler.state.reader import committed_program, pipeline_layout, read_manifest
from reconciler.support.errors import PipelinePaused, ReconcileError, public_message
from reconciler.support.faults import crash_point
from state_backends import StateBackend


@dataclass
class Outcome:
    """What an operation did, for the CLI and the GitHub Action to report."""

    pipeline: str
    # no-changes | deployed | awaiting-approval | cancelled | bootstrapped | refreshed |
    # stepped | idle | input-failed (a bad input file held every connector with input;
    # `details["bad_input"]`, also on a step that committed the other connectors' input)
    result: str
    message: str
    serial: int | None = None
    details: dict[str, Any] = field(default_factory=dict)


def _commit(project: Project, backend: StateBackend, manifest: Manifest, etag: str | None,
            engine: Engine | None = None) -> str:
    """Write the manifest, its paths relative to the storage root; with `engine`, it
    records where Spark ran and which Delta writer wrote (`status` shows both)."""
    if engine is not None:
        ran = {"spark_target": engine.target}
        if "storage" in engine.__dict__:  # the storage this command opened (never opens one)
            ran["delta_writer"] = engine.storage.writer.name
        manifest = replace(manifest, engine={**manifest.engine, **ran})
    document = manifest.stored_document(pipeline_layout(project, manifest.pipeline))
    return backend.write_manifest(manifest.pipeline, document, etag)


def _changes_summary(plan: PipelinePlan) -> str:
    details = plan.diff.status_details()
    parts = [f"{key}: {', '.join(value)}" for key, value in details["program_diff"].items()
             if value]
    parts += [f"{key}: {', '.join(value)}" for key, value in details.items()
              if key.endswith("_connectors") and value]
    return "; ".join(parts)


def apply_pipeline(project: Project, program: Program, backend: StateBackend, engine: Engine, *,
                   policy: str, auto_approve: bool = False, silent: bool = False,
                   saved_plan: dict[str, Any] | None = None,
                   confirm: Callable[[PipelinePlan], bool] | None = None,
                   git_sha: str | None = None, approving: bool = False,
                   full_refresh: bool = False, selection: Selection | None = None) -> Outcome:
    """Reconcile one pipeline (or a `selection` of it) with its specs, bootstrapping what changed
    (its connector options checked against the settings in force: a saved plan may predate them)."""
    name = program.pipeline
    program.check_file_cleanup(project.settings.allow_file_cleanup)
    with backend.locked(name, "apply"):
        manifest, etag = read_manifest(backend, name, pipeline_layout(project, name))
        if approving:
            selection = _check_awaiting(manifest, program)
        if full_refresh and manifest is not None:
            return _full_refresh(project, program, manifest, etag, backend, engine, git_sha)
        settings = settings_summary(project.settings)
        plan = plan_pipeline(program, manifest, etag, settings, selection=selection)
        if saved_plan is not None:
            _check_saved_plan(saved_plan, plan)
        if plan.refusals:
            raise ReconcileError(f"pipeline '{name}': " + "; ".join(plan.refusals))
        if manifest is None:
            return _deploy(project, program, backend, engine, git_sha, settings)
        if manifest.status in ("Bootstrapping", "Failed"):
            manifest = _undo_uncommitted_writes(engine, manifest)
        resuming = (manifest.status in ("Bootstrapping", "Failed", "AwaitingApproval")
                    and (manifest.pending or {}).get("desired_fingerprint")
                    == plan.desired_fingerprint)
        if not plan.has_changes:
            if manifest.status != "Running" and not plan.left_out:
                # The specs are the committed program again (a change was reverted, or an
                # interrupted bootstrap is abandoned): its committed state is valid as it is.
                manifest = manifest.next(status="Running", status_details=None, pending=None,
                                         analysis=_memo(program))
                _commit(project, backend, manifest, etag)
            return Outcome(name, "no-changes", f"{name}: no changes", manifest.serial)
        if policy == "reject" and plan.bootstrap_required:
            raise ReconcileError(f"pipeline '{name}' was modified and bootstrap_policy is "
                                 f"'reject': {_changes_summary(plan)}")
        approved = (auto_approve or policy in ("allow", "reject") or saved_plan is not None
                    or approving or (resuming and manifest.status != "AwaitingApproval"))
        if not approved and confirm is not None:
            approved = confirm(plan)
            if not approved:
                return Outcome(name, "cancelled", f"{name}: apply cancelled", manifest.serial)
        details = plan.diff.status_details()
        pending = plan.pending
        if not approved:
            if manifest.status == "AwaitingApproval" and resuming:
                return Outcome(name, "awaiting-approval", _awaiting_message(name),
                               manifest.serial, details)
            waiting = manifest.next(status="AwaitingApproval", status_details=details,
                                    pending=pending)
            _commit(project, backend, waiting, etag)
            return Outcome(name, "awaiting-approval", _awaiting_message(name), waiting.serial,
                           details)
        return _bootstrap(project, program, plan, manifest, etag, backend, engine,
                          details=details, pending=pending, silent=silent, git_sha=git_sha,
                          resuming=resuming and manifest.status == "Bootstrapping")


def _awaiting_message(name: str) -> str:
    return (f"{name}: changes are awaiting approval; review with `reconcile status --pipeline "
            f"{name}` and run `reconcile approve --pipeline {name}`")


def approve_pipeline(project: Project, program: Program, backend: StateBackend, engine: Engine,
                     *, silent: bool = False, git_sha: str | None = None) -> Outcome:
    """Approve the changes an `await_approval` apply recorded, if the specs still match
    (checked under the pipeline's lock, in `apply_pipeline`)."""
    return apply_pipeline(project, program, backend, engine, policy="allow", silent=silent,
                          git_sha=git_sha, approving=True)


def _check_awaiting(manifest: Manifest | None, program: Program) -> Selection | None:
    """`approve` approves exactly the change that was recorded (its selection too), nothing else."""
    if manifest is None or manifest.status != "AwaitingApproval":
        status = manifest.status if manifest else "not deployed"
        raise ReconcileError(f"pipeline '{program.pipeline}' is not awaiting approval "
                             f"(status: {status})")
    selection = Selection.from_document((manifest.pending or {}).get("selection"))
    if (manifest.pending or {}).get("desired_fingerprint") != \
            desired_fingerprint(program, selection):
        raise ReconcileError(f"pipeline '{program.pipeline}': the specs changed since the "
                             "changes were recorded for approval; run `reconcile apply` again")
    return selection


def _check_saved_plan(saved: dict[str, Any], plan: PipelinePlan) -> None:
    entry = next((p for p in saved["pipelines"] if p["name"] == plan.name), None)
    if entry is None:
        raise ReconcileError(f"the saved plan has no pipeline '{plan.name}'")
    base = plan.base.document() if plan.base else None
    recorded = entry["base"]
    if (recorded or {}).get("lineage") != (base or {}).get("lineage") or \
            (recorded or {}).get("serial") != (base or {}).get("serial"):
        raise ReconcileError(f"stale plan for '{plan.name}': it was made against serial "
                             f"{(recorded or {}).get('serial')}, the backend is at "
                             f"{(base or {}).get('serial')}; plan again")
    if entry["desired_fingerprint"] != plan.desired_fingerprint:
        raise ReconcileError(f"stale plan for '{plan.name}': the specs changed since it was "
                             "made; plan again")
    if entry.get("settings") != plan.settings:
        raise ReconcileError(f"stale plan for '{plan.name}': reconcile.yaml settings changed "
                             "since it was made; plan again")
    if entry.get("bootstrap_policy", plan.bootstrap_policy) != plan.bootstrap_policy:
        raise ReconcileError(f"stale plan for '{plan.name}': its bootstrap_policy changed "
                             "since it was made; plan again")


def first_manifest(program: Program, **fields: Any) -> Manifest:
    """The manifest a first deployment commits: the program, the analysis memo, `fields`."""
    return Manifest.first(program.pipeline, program.document(), analysis=_memo(program),
                          **fields)


def _memo(program: Program) -> dict[str, Any] | None:
    """The analysis memo a committed manifest keeps for later plans (`desired.memo`): what
    analysing `program` found here, every view analysed from its SQL (apply reads none)."""
    return program.analysis.document() if program.analysis is not None else None


def _deploy(project: Project, program: Program, backend: StateBackend, engine: Engine,
            git_sha: str | None, settings: dict[str, str]) -> Outcome:
    """First deployment: every table created empty, every view computed (empty)."""
    document = program.document()
    runtime = engine.runtime(program.pipeline, CommittedProgram.of(document), {})
    diff = diff_programs(None, document)
    # A new pipeline has empty views: there are no contents to send to its outputs yet.
    result = bootstrap(runtime, diff, {}, serial=1, silent=True)
    manifest = first_manifest(program, relations=result.relations,
                              connectors=result.connectors, git_sha=git_sha, settings=settings)
    _commit(project, backend, manifest, None, engine)
    publish_committed(engine, manifest, document, program.publish)
    return Outcome(program.pipeline, "deployed",
                   f"{program.pipeline}: deployed {len(program.tables)} tables and "
                   f"{len(program.views)} views (serial 1)", 1)


def _bootstrap(project: Project, program: Program, plan: PipelinePlan, manifest: Manifest,
               etag: str | None, backend: StateBackend, engine: Engine, *,
               details: dict[str, Any], pending: dict[str, Any], silent: bool,
               git_sha: str | None, resuming: bool) -> Outcome:
    name = program.pipeline
    started = manifest
    if not resuming:  # a resumed bootstrap keeps its serial: outputs get the same file names
        started = manifest.next(status="Bootstrapping", status_details=details, pending=pending)
        etag = _commit(project, backend, started, etag)
    crash_point("bootstrap-started")
    document = plan.diff.new  # the program: with a selection, part committed, part desired
    runtime = engine.runtime(name, CommittedProgram.of(document), manifest.relations)
    try:
        result = bootstrap(runtime, plan.diff, manifest.connectors, serial=started.serial + 1,
                           silent=silent)
    except Exception as error:
        # Manifests are shown again by plans (and so in pull requests): no error text.
        failed = started.next(status="Failed", status_details={
            **details, "error": public_message(error)})
        _commit(project, backend, failed, etag)
        raise
    crash_point("bootstrap-before-commit")
    done = started.next(status="Running", status_details=None, pending=None, program=document,
                        relations=result.relations, connectors=result.connectors,
                        git_sha=git_sha or manifest.git_sha,
                        settings=settings_summary(project.settings), analysis=_memo(program))
    _commit(project, backend, done, etag, engine)
    publish_committed(engine, done, document, program.publish)
    _discard_unused(engine, manifest, done)
    collect_garbage(project, backend, name)
    recomputed = ", ".join(result.recomputed) or "nothing"
    moved = "".join(f"; renamed {old} -> {new}" for new, old in result.renamed.items())
    evolved = "".join(f"; evolved {table}" for table in result.evolved_tables)
    return Outcome(name, "bootstrapped",
                   f"{name}: bootstrapped (serial {done.serial}){moved}{evolved}; "
                   f"recomputed {recomputed}",
                   done.serial, {"recomputed": result.recomputed,
                                 "created_tables": result.created_tables,
                                 "evolved_tables": result.evolved_tables,
                                 "renamed": result.renamed,
                                 "emitted": result.emitted})


def _full_refresh(project: Project, program: Program, manifest: Manifest, etag: str | None,
                  backend: StateBackend, engine: Engine, git_sha: str | None) -> Outcome:
    """Rebuild everything from the sources: what one would do without bootstrapping.

    Every table is emptied, every input connector starts a new checkpoint generation
    and re-ingests all of its input, and every view is recomputed. `Bootstrapping` is
    committed first: after a crash the tables emptied in place are restored to their
    committed versions by the next `apply` (see `_undo_uncommitted_writes`).
    """
    if manifest.status in ("Bootstrapping", "Failed"):
        manifest = _undo_uncommitted_writes(engine, manifest)
    started = manifest.next(status="Bootstrapping", status_details=None,
                            pending={"desired_fingerprint": program.fingerprint,
                                     "full_refresh": True})
    etag = _commit(project, backend, started, etag)
    document = program.document()
    # Tables keep their state entries only for the `execute` marks their logs still hold.
    runtime = engine.runtime(program.pipeline, CommittedProgram.of(document), {
        name: state for name, state in manifest.relations.items() if name in program.tables})
    serial = started.serial + 1
    result = bootstrap(runtime, diff_programs(None, document), manifest.connectors,
                       serial=serial, silent=True)
    step = run_step(runtime, result.connectors, serial=serial)
    done = started.next(status="Running", status_details=None, pending=None, program=document,
                         relations=runtime.relations, connectors=step.connectors,
                         settings=settings_summary(project.settings),
                         git_sha=git_sha or manifest.git_sha, analysis=_memo(program),
                         last_step={"ingested": step.ingested, "refreshed": step.refreshed})
    _commit(project, backend, done, etag, engine)
    publish_committed(engine, done, document, program.publish)
    _discard_unused(engine, manifest, done)
    collect_garbage(project, backend, program.pipeline)
    return Outcome(program.pipeline, "refreshed",
                   f"{program.pipeline}: full refresh (serial {done.serial}); re-ingested "
                   f"{', '.join(step.ingested) or 'no connector'}", done.serial)


def _undo_uncommitted_writes(engine: Engine, manifest: Manifest) -> Manifest:
    """Restore tables that an interrupted bootstrap emptied in place to their committed version.

    While a pipeline is not Running nothing but a bootstrap writes to its tables, so
    any newer version comes from a bootstrap that never committed; left alone, the
    next step would adopt it as ingested data. Returns the manifest with the new
    (identical in content) versions, which the caller commits with its next manifest.
    """
    from reconciler.engine.delta.log import probe_latest_version

    stale = [name for name, record in manifest.relations.items() if record.kind == "table"
             and probe_latest_version(record.path) not in (None, record.version)]
    if not stale:  # the usual case: decided from the Delta logs, without starting Spark
        return manifest
    relations = dict(manifest.relations)
    for name in stale:
        record = relations[name]
        relations[name] = record.at(engine.storage.restore(record.path, record.version))
    return replace(manifest, relations=relations)


def collect_garbage(project: Project, backend: StateBackend, name: str, *,
                    dry_run: bool = False, strict: bool = False) -> Any:
    """Retention after a commit (see `engine/delta/retention.py`); no Spark is started.

    The retained manifests are the newest `retention.serials` of the backend's history,
    each checked against the layout and its paths made absolute first. After a commit a
    failure here only skips the pass (the commit stands; the next one tries again);
    `strict` (for `state gc`) raises.
    """
    from reconciler.engine.delta.retention import collect_garbage as collect

    layout = pipeline_layout(project, name)
    retention = project.settings.retention
    try:
        serials = sorted(backend.list_history(name), reverse=True)[:retention.serials]
        where = f"{backend.url}/{name}/history"
        documents = [Manifest.from_document(backend.read_history(name, serial), where)
                     .resolved(layout, where).to_document() for serial in serials]
        if not documents:
            return None
        return collect(layout, documents, min_age_seconds=retention.min_age_seconds,
                       dry_run=dry_run)
    except Exception as error:
        if strict:
            raise
        logging.getLogger("reconciler").warning(
            "retention skipped for %s (%s); `reconcile state gc -p %s` retries it",
            name, public_message(error), name)
        return None


def _discard_unused(engine: Engine, before: Manifest, after: Manifest) -> None:
    """After the commit, delete the Delta folders no manifest points to any more."""
    live = {record.path for record in after.relations.values()}
    for record in before.relations.values():
        if record.path not in live:
            engine.storage.delete(record.path)


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
        if manifest.status != "Running":
            raise PipelinePaused(f"pipeline '{name}' is {manifest.status}, not Running: "
                                 "finish it with `reconcile apply` or `reconcile approve`")
        program = committed_program(backend, manifest)  # the state bucket is not code
        if insert is None:  # the settings may have withdrawn what the apply allowed
            check_committed_options(name, program.document, project.settings.allow_file_cleanup)
        if insert is None and not has_pending_input(program, manifest.relations,
                                                    manifest.connectors, project.root):
            return Outcome(name, "idle", "; ".join([f"{name}: no new input", *missing_inputs(
                program, project.root)]), manifest.serial), StepResult()
        started = time.monotonic()
        runtime = engine.runtime(name, program, manifest.relations)
        step = run_step(runtime, manifest.connectors, serial=manifest.serial + 1,
                        ingest_inputs=insert is None,
                        after_discard=insert)
        held = {"bad_input": step.bad_input} if step.bad_input else {}
        if not step.has_changes:
            if held:
                return Outcome(name, "input-failed", "; ".join(step.bad_input.values()),
                               manifest.serial, details=held), step
            return Outcome(name, "idle", f"{name}: no new input", manifest.serial), step
        crash_point("step-before-commit")
        seconds = time.monotonic() - started
        rows = {table: (runtime.relations[table].rows or 0)
                - (manifest.relations[table].rows or 0) for table in step.changed_tables}
        committed = manifest.next(relations=runtime.relations, connectors=step.connectors,
                                  last_step={
            "ingested": step.ingested, "changed_tables": step.changed_tables,
            "refreshed": step.refreshed, "emitted": step.emitted,
            "seconds": round(seconds, 3), "rows": rows,
            **({"expectations": runtime.expectation_counts} if runtime.expectation_counts
               else {}),
            **({"choices": runtime.refresh_choices} if runtime.refresh_choices else {})})
        _commit(project, backend, committed, etag, engine)
        publish_committed(engine, committed, program, publish_setting(project, name))
        collect_garbage(project, backend, name)
        return Outcome(name, "stepped",
                       f"{name}: step committed (serial {committed.serial}) in {seconds:.1f}s; "
                       f"rows {', '.join(f'{t} {n:+d}' for t, n in rows.items())}; refreshed "
                       f"{', '.join(step.refreshed) or 'no views'}"
                       + "".join(f"; {view} {described}" for view, described
                                 in sorted(runtime.refresh_choices.items())), committed.serial,
                       details={"seconds": seconds, "rows": rows, **held}), step
