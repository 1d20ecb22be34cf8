"""`apply` and `approve` of one pipeline: decide, confirm, then write (`operations.deploy`).

Under the pipeline's lock the plan is made again from the committed manifest (a saved
or shown plan is only checked against it: it may be stale), and the apply then decides,
in this order: refuse (refusals, `bootstrap_policy: reject`), nothing to do, approved
already (the policy, `--auto-approve`, a saved plan, `approve`, a bootstrap to resume),
ask (`confirm`, on a terminal), or park the change as `AwaitingApproval`. Only an
approved change reaches the engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reconciler.desired.model.program import Program
from reconciler.desired.settings.project import Project, settings_summary
from reconciler.operations.commit import analysis_memo, commit_manifest, undo_uncommitted_writes
from reconciler.operations.deploy import ApplyTarget, bootstrap_changes, deploy, full_refresh
from reconciler.operations.engine import Engine
from reconciler.operations.outcome import Outcome, OutcomeKind
from reconciler.operations.publication import publish_committed, published_in
from reconciler.plan.artifact import Plan
from reconciler.plan.document import PipelinePlan, desired_fingerprint, plan_pipeline
from reconciler.plan.selection import Selection
from reconciler.state.manifest import Manifest, Status
from reconciler.state.reader import pipeline_layout, read_manifest
from reconciler.support.errors import ReconcileError
from state_backends import StateBackend

# A change in these statuses was recorded and not finished: the same specs resume it.
_UNFINISHED = (Status.BOOTSTRAPPING, Status.FAILED, Status.AWAITING_APPROVAL)


@dataclass(frozen=True)
class ApplyOptions:
    """How an apply decides and what it records, as the command that runs it says.

    `policy` is the bootstrap policy in force (the pipeline's, or `--bootstrap-policy`);
    `saved_plan` a plan file (or the Action's shown plan) the apply must match; `confirm`
    asks on a terminal; `approving` is `reconcile approve`; `selection` narrows the apply
    (`--select`).
    """

    policy: str
    auto_approve: bool = False
    silent: bool = False
    saved_plan: Plan | None = None
    confirm: Callable[[PipelinePlan], bool] | None = None
    git_sha: str | None = None
    approving: bool = False
    full_refresh: bool = False
    selection: Selection | None = None


def apply_pipeline(project: Project, program: Program, backend: StateBackend, engine: Engine,
                   options: ApplyOptions) -> Outcome:
    """Reconcile one pipeline (or a selection of it) with its specs, bootstrapping what changed
    (its connector options checked against the settings in force: a saved plan may predate them)."""
    target = ApplyTarget(project, program, backend, engine)
    program.check_file_cleanup(project.settings.allow_file_cleanup)
    with backend.locked(target.name, "apply"):
        manifest, etag = read_manifest(backend, target.name,
                                       pipeline_layout(project, target.name))
        selection = _check_awaiting(manifest, program) if options.approving \
            else options.selection
        if options.full_refresh and manifest is not None:
            return full_refresh(target, manifest, etag, options.git_sha)
        settings = settings_summary(project.settings)
        plan = plan_pipeline(program, manifest, etag, settings, selection=selection)
        if options.saved_plan is not None:
            _check_saved_plan(options.saved_plan, plan)
        if plan.refusals:
            raise ReconcileError(f"pipeline '{target.name}': " + "; ".join(plan.refusals))
        if manifest is None:
            return deploy(target, options.git_sha, settings)
        return _change(target, plan, manifest, etag, options)


def approve_pipeline(project: Project, program: Program, backend: StateBackend, engine: Engine,
                     *, silent: bool = False, git_sha: str | None = None) -> Outcome:
    """Approve the changes an `await_approval` apply recorded, if the specs still match
    (checked under the pipeline's lock, in `apply_pipeline`)."""
    return apply_pipeline(project, program, backend, engine, ApplyOptions(
        policy="allow", silent=silent, git_sha=git_sha, approving=True))


def _change(target: ApplyTarget, plan: PipelinePlan, manifest: Manifest, etag: str | None,
            options: ApplyOptions) -> Outcome:
    """A deployed pipeline: decide, confirm, then bootstrap the plan or park it."""
    name = target.name
    if manifest.status in (Status.BOOTSTRAPPING, Status.FAILED):
        manifest = undo_uncommitted_writes(target.engine, manifest)
    resuming = (manifest.status in _UNFINISHED and manifest.pending is not None
                and manifest.pending.desired_fingerprint == plan.desired_fingerprint)
    if not plan.has_changes:
        return _no_changes(target, plan, manifest, etag)
    if options.policy == "reject" and plan.bootstrap_required:
        raise ReconcileError(f"pipeline '{name}' was modified and bootstrap_policy is "
                             f"'reject': {_changes_summary(plan)}")
    approved = _approved_beforehand(manifest, options, resuming)
    if not approved and options.confirm is not None:
        if not options.confirm(plan):
            return Outcome(name, OutcomeKind.CANCELLED, f"{name}: apply cancelled",
                           manifest.serial)
        approved = True
    if not approved:
        return _park(target, plan, manifest, etag, resuming)
    return bootstrap_changes(target, plan, manifest, etag, silent=options.silent,
                             git_sha=options.git_sha,
                             resuming=resuming and manifest.status == Status.BOOTSTRAPPING)


def _approved_beforehand(manifest: Manifest, options: ApplyOptions, resuming: bool) -> bool:
    """Whether the change needs no one's yes now: the policy allows it (or `reject`, which
    refused already if bootstrapping was needed), it was approved when planned (a saved
    plan, `--auto-approve`, `approve`), or it is an approved bootstrap that stopped."""
    return (options.auto_approve or options.policy in ("allow", "reject")
            or options.saved_plan is not None or options.approving
            or (resuming and manifest.status != Status.AWAITING_APPROVAL))


def _no_changes(target: ApplyTarget, plan: PipelinePlan, manifest: Manifest,
                etag: str | None) -> Outcome:
    """The specs are the committed program again (a change was reverted, or an interrupted
    bootstrap is abandoned): its committed state is valid as it is, and the pipeline runs.
    Applying specs equal to the committed program approves it (`engine.approval`). A
    `publish:` removed or moved to another database since the last commit is carried out
    (a commit of its own: the views dropped where that one published them)."""
    wanted, previous = published_in(target.program.publish), manifest.published
    moved = previous is not None and previous != wanted
    resuming = manifest.status != Status.RUNNING and not plan.left_out
    if resuming or moved:
        running: dict[str, Any] = {"status": Status.RUNNING, "status_details": None,
                                   "pending": None, "analysis": analysis_memo(target.program)}
        manifest = manifest.next(published=wanted, **(running if resuming else {}))
        commit_manifest(target.project, target.backend, manifest, etag, approves=True)
        if moved:
            publish_committed(target.engine, manifest, manifest.program,
                              target.program.publish, previous=previous)
    said = f"; its views in '{previous}' dropped" if moved and wanted is None else ""
    return Outcome(target.name, OutcomeKind.NO_CHANGES, f"{target.name}: no changes{said}",
                   manifest.serial)


def _park(target: ApplyTarget, plan: PipelinePlan, manifest: Manifest, etag: str | None,
          resuming: bool) -> Outcome:
    """Record the change as `AwaitingApproval` for `reconcile approve` (once: a change
    already parked with the same specs is only reported again). The manifest keeps what
    changes and, per object, its action and why (`status` shows them to the approver)."""
    name = target.name
    details = {**plan.diff.status_details(), "actions": [
        {"kind": action.kind, "name": action.name, "action": action.action,
         "reasons": list(action.reasons)} for action in plan.actions if action.action != "keep"]}
    if manifest.status == Status.AWAITING_APPROVAL and resuming:
        return Outcome(name, OutcomeKind.AWAITING_APPROVAL, _awaiting_message(name),
                       manifest.serial, details)
    waiting = manifest.next(status=Status.AWAITING_APPROVAL, status_details=details,
                            pending=plan.pending)
    commit_manifest(target.project, target.backend, waiting, etag)
    return Outcome(name, OutcomeKind.AWAITING_APPROVAL, _awaiting_message(name),
                   waiting.serial, details)


def _changes_summary(plan: PipelinePlan) -> str:
    details = plan.diff.status_details()
    parts = [f"{key}: {', '.join(value)}" for key, value in details["program_diff"].items()
             if value]
    parts += [f"{key}: {', '.join(value)}" for key, value in details.items()
              if key.endswith("_connectors") and value]
    return "; ".join(parts)


def _awaiting_message(name: str) -> str:
    return (f"{name}: changes are awaiting approval; review with `reconcile status --pipeline "
            f"{name}` and run `reconcile approve --pipeline {name}`")


def _check_awaiting(manifest: Manifest | None, program: Program) -> Selection | None:
    """`approve` approves exactly the change that was recorded (its selection too), nothing else."""
    if manifest is None or manifest.status != Status.AWAITING_APPROVAL:
        status = manifest.status if manifest else "not deployed"
        raise ReconcileError(f"pipeline '{program.pipeline}' is not awaiting approval "
                             f"(status: {status})")
    pending = manifest.pending
    selection = Selection.from_document(pending.selection if pending else None)
    if pending is None or pending.desired_fingerprint != desired_fingerprint(program, selection):
        raise ReconcileError(f"pipeline '{program.pipeline}': the specs changed since the "
                             "changes were recorded for approval; run `reconcile apply` again")
    return selection


def _check_saved_plan(saved: Plan, plan: PipelinePlan) -> None:
    """A saved plan is applied only as it was reviewed: against the same base, specs,
    settings and bootstrap policy as the plan made now under the lock."""
    entry = saved.pipeline(plan.name)
    if entry is None:
        raise ReconcileError(f"the saved plan has no pipeline '{plan.name}'")
    recorded, base = entry.base, plan.base
    if (recorded.lineage if recorded else None) != (base.lineage if base else None) or \
            (recorded.serial if recorded else None) != (base.serial if base else None):
        raise ReconcileError(f"stale plan for '{plan.name}': it was made against serial "
                             f"{recorded.serial if recorded else None}, the backend is at "
                             f"{base.serial if base else None}; plan again")
    if entry.desired_fingerprint != plan.desired_fingerprint:
        raise ReconcileError(f"stale plan for '{plan.name}': the specs changed since it was "
                             "made; plan again")
    if entry.settings != plan.settings:
        raise ReconcileError(f"stale plan for '{plan.name}': reconcile.yaml settings changed "
                             "since it was made; plan again")
    if (entry.bootstrap_policy or plan.bootstrap_policy) != plan.bootstrap_policy:
        raise ReconcileError(f"stale plan for '{plan.name}': its bootstrap_policy changed "
                             "since it was made; plan again")
