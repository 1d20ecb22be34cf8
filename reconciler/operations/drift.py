"""Drift of a pipeline's tables from what its manifest pins, and what a step does about it.

`engine.delta.drift` finds it from the Delta logs (no JVM). `plan` and `status` show every
drifted relation, files included (`pipelines_drift`). A step looks before it builds
(`settle_drift`), cheaply (a relation whose log has no commit past its pinned version, the
usual case, costs one existence check), and does what `on_drift` in pipeline.yaml says:

    refuse   (the default) stop with one line naming the relation, the commit and the ways out
    adopt    a table's foreign commits are this step's input, as if ingested (a notebook's
             append reaches the views); a view's are undone (its rows are its query's)
    repair   every foreign commit is undone: the relation is restored to its pinned version

Undoing is Delta's restore to the pinned version, a new commit of the engine's own that the
step's manifest then pins. A pinned version whose files are gone cannot be restored: a view
is then recomputed from its inputs by `reconcile refresh --select VIEW`, and a table needs
its data back. Read at each step from pipeline.yaml as it is, as `publish:` is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

from reconciler.desired.settings.project import Project, load_pipeline_spec
from reconciler.operations.engine import Engine
from reconciler.plan.artifact import Plan
from reconciler.state.manifest import Manifest
from reconciler.state.reader import open_backend, pipeline_layout, read_manifest
from reconciler.support.errors import ReconcileError
from state_backends import StateBackend

DriftPolicy = Literal["refuse", "adopt", "repair"]


def drift_policy(project: Project, pipeline: str) -> DriftPolicy:
    """`on_drift:` of the pipeline's pipeline.yaml as it is now (refuse when it has none)."""
    folder = project.pipeline_dirs.get(pipeline)
    return "refuse" if folder is None else load_pipeline_spec(folder)[0].on_drift


def manifest_drift(manifest: Manifest, *, files: bool) -> list[Any]:
    """Each drifted relation of a committed manifest (paths resolved), as `Drift`s; with
    `files`, a pinned version's missing files count too (one listing per table)."""
    from reconciler.engine.delta.drift import committed_past, table_drift

    relations = manifest.relations
    names = sorted(relations) if files else sorted(committed_past(
        {name: (record.path, record.version) for name, record in relations.items()}))
    found = [table_drift(name, relations[name].path, relations[name].version, files=files)
             for name in names]
    return [drift for drift in found if drift is not None]


def pipelines_drift(project: Project, backend: StateBackend,
                    names: list[str]) -> list[dict[str, Any]]:
    """The drift of each named pipeline that has a manifest, for `plan` (one entry per
    drifted relation: `pipeline`, `relation`, `version`, `reason`)."""
    entries = []
    for name in names:
        manifest, _ = read_manifest(backend, name, pipeline_layout(project, name))
        if manifest is not None:
            entries += [{"pipeline": name, **drift.document()}
                        for drift in manifest_drift(manifest, files=True)]
    return entries


def settle_drift(project: Project, engine: Engine, manifest: Manifest) -> tuple[Manifest, bool]:
    """Before a step builds on `manifest`: refuse its drift, or adopt or repair it as
    `on_drift` says. Returns the manifest with the versions restored (the step commits
    them), and whether a table's foreign commits were adopted (the step must run, though
    no input came)."""
    drifted = manifest_drift(manifest, files=False)
    if not drifted:
        return manifest, False
    name, policy = manifest.pipeline, drift_policy(project, manifest.pipeline)
    first = drifted[0]
    if policy == "refuse":
        raise ReconcileError(
            f"pipeline '{name}': {manifest.relations[first.relation].kind} {first.relation}: "
            f"{first.reason}; nothing was built on it. Set on_drift: adopt (a table's rows "
            "become input) or repair (restore the pinned version) in pipeline.yaml, or "
            f"recompute a view with `reconcile refresh -p {name} --select {first.relation}`")
    relations, adopted = dict(manifest.relations), False
    for drift in drifted:
        record = relations[drift.relation]
        if drift.version is None:  # nothing to restore to: say how to get it back
            raise ReconcileError(f"pipeline '{name}': {drift.relation}: {drift.reason}")
        if policy == "adopt" and record.kind == "table":
            adopted = True
            continue
        relations[drift.relation] = record.at(engine.storage.restore(record.path,
                                                                     record.version))
    return replace(manifest, relations=relations), adopted


def plan_with_drift(plan: Plan, project: Project, backend_url: str | None = None) -> Plan:
    """`plan` with the drift of each of its pipelines (files included): what `plan` and the
    Action's comment show beside the changes."""
    backend = open_backend(project, backend_url)
    names = [pipeline.name for pipeline in plan.pipelines]
    return replace(plan, drift=tuple(pipelines_drift(project, backend, names)))
