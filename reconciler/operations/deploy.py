"""The three ways an apply writes a pipeline once it is decided: a first deployment, a
bootstrap of the planned changes, a full refresh.

Each works on Delta state no manifest points to yet and ends with one commit
(`operations.commit`); `operations.apply` decides which runs, and whether it may.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from reconciler.desired.model.program import Program
from reconciler.desired.settings.project import Project, settings_summary
from reconciler.engine.bootstrap.recompute import bootstrap
from reconciler.engine.step import run_step
from reconciler.operations.commit import (
    analysis_memo,
    collect_garbage,
    commit_manifest,
    discard_unused,
    first_manifest,
    undo_uncommitted_writes,
)
from reconciler.operations.engine import Engine
from reconciler.operations.environments import promotable
from reconciler.operations.outcome import Outcome, OutcomeKind
from reconciler.operations.publication import publish_committed, published_in
from reconciler.plan.diff import diff_programs
from reconciler.plan.document import PipelinePlan
from reconciler.state.manifest import Manifest, PendingChange, Status
from reconciler.state.program import CommittedProgram
from reconciler.support.errors import ReconcileError, public_message
from reconciler.support.faults import crash_point
from state_backends import StateBackend, StateBackendError

if TYPE_CHECKING:
    from reconciler.engine.promotion import Promotion


@dataclass(frozen=True)
class ApplyTarget:
    """The pipeline an apply writes, and where: its specs, the project's settings, its
    state backend and the engine (each way of writing needs all four)."""

    project: Project
    program: Program
    backend: StateBackend
    engine: Engine

    @property
    def name(self) -> str:
        return self.program.pipeline


def deploy(target: ApplyTarget, git_sha: str | None, settings: dict[str, str]) -> Outcome:
    """First deployment: every table created empty, every view computed (empty)."""
    program, engine = target.program, target.engine
    document = program.document()
    runtime = engine.runtime(program.pipeline, CommittedProgram.of(document), {})
    diff = diff_programs(None, document)
    # A new pipeline has empty views: there are no contents to send to its outputs yet.
    result = bootstrap(runtime, diff, {}, serial=1, silent=True)
    manifest = first_manifest(program, relations=result.relations,
                              connectors=result.connectors, git_sha=git_sha, settings=settings,
                              published=published_in(program.publish))
    commit_manifest(target.project, target.backend, manifest, None, engine, approves=True)
    publish_committed(engine, manifest, document, program.publish)
    return Outcome(program.pipeline, OutcomeKind.DEPLOYED,
                   f"{program.pipeline}: deployed {len(program.tables)} tables and "
                   f"{len(program.views)} views (serial 1)", 1)


def bootstrap_changes(target: ApplyTarget, plan: PipelinePlan, manifest: Manifest,
                      etag: str | None, *, silent: bool, git_sha: str | None,
                      resuming: bool) -> Outcome:
    """Carry out an approved plan: `Bootstrapping` committed first (unless `resuming` one,
    which keeps its serial: outputs get the same file names), then the changed views
    computed from the stored state, then `Running` with the new program; a failure commits
    `Failed` with the error's public text and raises."""
    name, engine = target.name, target.engine
    details = plan.diff.status_details()
    started = manifest
    if not resuming:
        started = manifest.next(status=Status.BOOTSTRAPPING, status_details=details,
                                pending=plan.pending)
        etag = commit_manifest(target.project, target.backend, started, etag)
    crash_point("bootstrap-started")
    document = plan.diff.new  # the program: with a selection, part committed, part desired
    runtime = engine.runtime(name, CommittedProgram.of(document), manifest.relations)
    promotion = _promotion(target, plan, manifest)
    try:
        result = bootstrap(runtime, plan.diff, manifest.connectors, serial=started.serial + 1,
                           silent=silent, elsewhere=promotion)
    except Exception as error:
        # Manifests are shown again by plans (and so in pull requests): no error text.
        failed = started.next(status=Status.FAILED, status_details={
            **details, "error": public_message(error)})
        commit_manifest(target.project, target.backend, failed, etag)
        raise
    finally:
        if promotion is not None:
            promotion.close()
    crash_point("bootstrap-before-commit")
    done = started.next(status=Status.RUNNING, status_details=None, pending=None,
                        program=document, relations=result.relations,
                        connectors=result.connectors, git_sha=git_sha or manifest.git_sha,
                        settings=settings_summary(target.project.settings),
                        analysis=analysis_memo(target.program))
    _finish(target, manifest, done, etag, document)
    recomputed = ", ".join(result.recomputed) or "nothing"
    if result.promoted:
        recomputed += f"; promoted {', '.join(result.promoted)} from environment " + (
            promotion.environment if promotion is not None else "?")
    moved = "".join(f"; renamed {old} -> {new}" for new, old in result.renamed.items())
    evolved = "".join(f"; evolved {table}" for table in result.evolved_tables)
    return Outcome(name, OutcomeKind.BOOTSTRAPPED,
                   f"{name}: bootstrapped (serial {done.serial}){moved}{evolved}; "
                   f"recomputed {recomputed}",
                   done.serial, {"recomputed": result.recomputed,
                                 "promoted": result.promoted,
                                 "created_tables": result.created_tables,
                                 "evolved_tables": result.evolved_tables,
                                 "renamed": result.renamed,
                                 "emitted": result.emitted})


def _promotion(target: ApplyTarget, plan: PipelinePlan,
               manifest: Manifest) -> Promotion | None:
    """The promotion of a current pull-request environment of the plan
    (`operations.environments.promotable`), or None: the views are computed."""
    from reconciler.engine.promotion import Promotion

    try:
        found = promotable(target.project, target.backend, plan, manifest)
    except (ReconcileError, StateBackendError) as error:  # its record or its base serial
        logging.getLogger("reconciler").warning(
            "%s: no environment promoted (%s); the views are computed", target.name,
            public_message(error))
        return None
    if found is None:
        return None
    environment, base = found
    return Promotion(environment.relations, base.relations, environment=environment.name)


def full_refresh(target: ApplyTarget, manifest: Manifest, etag: str | None,
                 git_sha: str | None) -> Outcome:
    """Rebuild everything from the sources: what one would do without bootstrapping.

    Every table is emptied, every input connector starts a new checkpoint generation
    and re-ingests all of its input, and every view is recomputed. `Bootstrapping` is
    committed first: after a crash the tables emptied in place are restored to their
    committed versions by the next `apply` (see `undo_uncommitted_writes`).
    """
    program, engine = target.program, target.engine
    if manifest.status in (Status.BOOTSTRAPPING, Status.FAILED):
        manifest = undo_uncommitted_writes(engine, manifest)
    started = manifest.next(status=Status.BOOTSTRAPPING, status_details=None,
                            pending=PendingChange(program.fingerprint, full_refresh=True))
    etag = commit_manifest(target.project, target.backend, started, etag)
    document = program.document()
    # Tables keep their state entries only for the `execute` marks their logs still hold.
    runtime = engine.runtime(program.pipeline, CommittedProgram.of(document), {
        name: state for name, state in manifest.relations.items() if name in program.tables})
    serial = started.serial + 1
    result = bootstrap(runtime, diff_programs(None, document), manifest.connectors,
                       serial=serial, silent=True)
    step = run_step(runtime, result.connectors, serial=serial)
    done = started.next(status=Status.RUNNING, status_details=None, pending=None,
                        program=document, relations=runtime.relations,
                        connectors=step.connectors,
                        settings=settings_summary(target.project.settings),
                        git_sha=git_sha or manifest.git_sha, analysis=analysis_memo(program),
                        last_step={"ingested": step.ingested, "refreshed": step.refreshed})
    _finish(target, manifest, done, etag, document)
    return Outcome(program.pipeline, OutcomeKind.REFRESHED,
                   f"{program.pipeline}: full refresh (serial {done.serial}); re-ingested "
                   f"{', '.join(step.ingested) or 'no connector'}", done.serial)


def _finish(target: ApplyTarget, before: Manifest, done: Manifest, etag: str | None,
            document: dict[str, Any]) -> None:
    """The commit of a bootstrap or full refresh, then what follows it: the views
    published, the Delta folders only `before` used deleted, retention run."""
    done = replace(done, published=published_in(target.program.publish))
    commit_manifest(target.project, target.backend, done, etag, target.engine, approves=True)
    publish_committed(target.engine, done, document, target.program.publish,
                      previous=before.published)
    discard_unused(target.engine, before, done)
    collect_garbage(target.project, target.backend, target.name)
