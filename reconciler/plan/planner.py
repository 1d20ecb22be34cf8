"""Plan the selected pipelines of a project against their committed state (no JVM)."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from reconciler.desired.model.program import Program, build_program
from reconciler.desired.settings.project import Project, load_project, settings_summary
from reconciler.desired.workspace import check_input_folders, load_source, select_pipelines
from reconciler.plan.artifact import Plan
from reconciler.plan.document import assemble_plan, plan_pipeline
from reconciler.plan.selection import Selection, one_pipeline
from reconciler.state.manifest import Manifest
from reconciler.state.reader import open_backend, orphaned_pipelines, pipeline_layout, read_manifest
from reconciler.support.errors import ReconcileError
from reconciler.support.process import is_one_shot
from state_backends import LocalBackend, StateBackend, StateBackendError

Committed = tuple[Manifest | None, str | None]  # a pipeline's manifest and its version tag


def compute_plan(project_dir: Path, pipeline: str | None,
                 backend_url: str | None, selection: Selection | None = None) -> Plan:
    """The plan for every selected pipeline, each against its manifest.

    The manifests are read first, so that each pipeline's program is built with the
    analysis memo its manifest keeps (`desired.analysis.memo`) when no pull request can have written
    it (`trusted_memo`): only the views that changed are analysed. Reading them is an
    optimisation here: one that fails is read again where a plan always read it, after
    the programs are built, and fails there as it always did.
    """
    with _no_collections():
        return _compute_plan(load_project(project_dir), pipeline, backend_url, selection)


def _compute_plan(project: Project, pipeline: str | None, backend_url: str | None,
                  selection: Selection | None) -> Plan:
    """`compute_plan`, as `load_programs` then `plan_project` but with the memos."""
    backend = open_backend(project, backend_url)
    orphans = orphaned_pipelines(project, backend) if pipeline is None else None
    if pipeline is not None and pipeline not in project.pipeline_dirs:
        _refuse_orphan(backend, pipeline)
    # A project whose last pipeline folder went still plans: its orphans are the plan.
    names = [] if orphans and not project.pipeline_dirs else select_pipelines(project, pipeline)
    committed, memos = committed_memos(project, names, backend=backend)
    programs = [build_program(load_source(project, name), memos.get(name)) for name in names]
    return plan_project(project, programs, backend_url, committed=committed,
                        selection=selection, orphans=orphans, backend=backend)


def _refuse_orphan(backend: StateBackend, pipeline: str) -> None:
    """A pipeline asked for by name that only the backend holds: say so, and how to remove
    it, rather than only that the project has no such pipeline."""
    try:
        manifest, _ = read_manifest(backend, pipeline)
    except (ReconcileError, StateBackendError):
        return  # the usual "unknown pipeline" follows
    if manifest is not None:
        raise ReconcileError(f"pipeline '{pipeline}' is not in the project, but "
                             f"{backend.url} holds its state (serial {manifest.serial}): "
                             f"remove it with `reconcile destroy -p {pipeline}`")


def committed_memos(project: Project, names: list[str], backend_url: str | None = None, *,
                    backend: StateBackend | None = None
                    ) -> tuple[dict[str, Committed], dict[str, Mapping[str, Any] | None]]:
    """The manifests of `names` as `project`'s backend holds them (`backend`, when the
    caller opened it), and their analysis memos where trusted (`trusted_memo`). Reading a
    manifest is an optimisation here: any failure leaves the programs analysed from their
    SQL, and the plan reads the manifest again (and reports what went wrong)."""
    committed: dict[str, Committed] = {}
    memos: dict[str, Mapping[str, Any] | None] = {}
    try:
        backend = backend or open_backend(project, backend_url)
        for name in names:
            committed[name] = read_manifest(backend, name, pipeline_layout(project, name))
            memos[name] = trusted_memo(project, backend, committed[name][0])
    except Exception:  # any failure: see the docstring
        pass
    return committed, memos


@contextmanager
def _no_collections() -> Iterator[None]:
    """Compute a plan with Python's cyclic garbage collector off.

    A plan allocates objects that only that collector frees (a sqlglot tree links each
    node to its parent, a scope to its parent scope), about 700 a view as the analyses
    parse, copy and walk, and each collection reads every object of the generations it
    collects: at the threshold a plan used before (20,000) it ran about 40 times over a
    1,000-view plan, then once more over everything at the process's exit. Off, what
    became garbage is freed by the first collection after the plan, in one pass. In a
    process that ends with its command (`process.one_shot_process`) what the plan made is frozen
    instead (`gc.freeze`): no later collection reads it, the one at exit included, and
    the exit returns the memory. Measured in `bench/README.md` ("Plan time").
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if is_one_shot():
            gc.freeze()
        if enabled:
            gc.enable()


def plan_project(project: Project, programs: list[Program], backend_url: str | None = None,
                 notes: Mapping[str, tuple[str, ...]] | None = None, *,
                 committed: Mapping[str, Committed] | None = None,
                 selection: Selection | None = None,
                 orphans: list[dict[str, Any]] | None = None,
                 backend: StateBackend | None = None) -> Plan:
    """The plan for `programs` under `project`'s settings (which the GitHub Action
    replaces with trusted ones, adding `notes` per pipeline on what it replaced). Options
    that delete or move input files are checked here, against those final settings, then
    that every local input folder exists (`desired.workspace.check_input_folders`).
    `committed` holds manifests already read from that backend (`compute_plan`), `orphans`
    the pipelines it holds that the project no longer has (`orphaned_pipelines`); a
    `selection` narrows the plan of the one pipeline it is for (`one_pipeline`). `backend`:
    the project's, when the caller opened it already (a plan opens it once)."""
    one_pipeline(programs, selection)
    for program in programs:
        program.check_file_cleanup(project.settings.allow_file_cleanup)
    for program in programs:
        check_input_folders(program, project.root)
    backend = backend or open_backend(project, backend_url)
    settings = settings_summary(project.settings)
    plans = []
    for program in programs:
        manifest, etag = (committed or {}).get(program.pipeline) or read_manifest(
            backend, program.pipeline, pipeline_layout(project, program.pipeline))
        plans.append(plan_pipeline(program, manifest, etag, settings,
                                   (notes or {}).get(program.pipeline, ()), selection))
    return assemble_plan(plans, project.root, orphans)


def trusted_memo(project: Project, backend: StateBackend,
                 manifest: Manifest | None) -> Mapping[str, Any] | None:
    """The manifest's analysis memo, unless a pull request could have written it.

    A memo's entries are keyed by everything their analysis reads, so a stale one is
    never used; but an entry edited to say something else cannot be told from a true
    one without analysing again (`desired.analysis.memo`). A pull request writes files of the
    checkout, and a state folder inside the checkout (the default `.reconcile/state`)
    could hold a manifest it committed: there the memo is ignored and every view is
    analysed. A backend elsewhere (S3, a folder outside the checkout) is written only
    by applies, which analyse every view from its SQL.
    """
    if manifest is None or manifest.analysis is None:
        return None
    if isinstance(backend, LocalBackend) and _in_checkout(backend.root, project.root):
        return None
    return manifest.analysis


def _in_checkout(folder: Path, project_root: Path) -> bool:
    """Whether `folder` is inside the project, or inside the git checkout holding it (the
    nearest folder above with a `.git`), as written or with its links resolved."""
    project = Path(os.path.abspath(project_root))
    roots = {project, project.resolve()}
    for parent in (project.resolve(), *project.resolve().parents):
        if (parent / ".git").exists():
            roots.add(parent)
            break
    candidates = {Path(os.path.abspath(folder)), Path(folder).resolve()}
    return any(candidate.is_relative_to(root) for candidate in candidates for root in roots)
