"""One pipeline's plan: its diff, actions (`plan.actions`), notes and refusals.

A `PipelinePlan` holds the whole `ProgramDiff` an apply carries out; its entry of the
plan artifact (`plan.artifact.PlannedPipeline`) is what a reviewer approves. The
artifact is a contract (docs/concepts.md): `plan_id` is the SHA-256 of the canonical
plan body, so two plans of the same inputs against the same base have the same id, and
`apply` can refuse a plan that no longer matches the backend (base lineage and serial)
or the specs (desired fingerprint).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.desired.analysis.lineage import view_lineage
from reconciler.desired.model.fingerprint import stable_hash
from reconciler.desired.model.program import Program
from reconciler.plan.actions import (
    Action,
    connector_actions,
    handling_descriptions,
    relation_actions,
)
from reconciler.plan.artifact import Base, Plan, PlannedPipeline
from reconciler.plan.diff import ProgramDiff, diff_programs
from reconciler.plan.rereads import reread_refusals
from reconciler.plan.selection import Selection, narrow
from reconciler.state.manifest import (
    Manifest,
    PendingChange,
    Status,
    spark_version,
    utc_now,
)
from reconciler.support.errors import ReconcileError, public_message
from reconciler.support.git import checked_out_commit


@dataclass(frozen=True)
class PipelinePlan:
    name: str
    base: Base | None
    desired_fingerprint: str
    diff: ProgramDiff
    actions: tuple[Action, ...]
    notes: tuple[str, ...]
    refusals: tuple[str, ...]
    settings: dict[str, str] | None = None
    bootstrap_policy: str = "await_approval"
    publish: dict[str, Any] | None = None  # pipeline.yaml's `publish:`: where views appear
    selection: Selection | None = None  # `--select`: only these objects' changes
    left_out: tuple[str, ...] = ()  # changes a selection leaves pending ("kind name")

    @property
    def has_changes(self) -> bool:
        return self.base is None or self.diff.has_changes

    @property
    def bootstrap_required(self) -> bool:
        """A deployed pipeline whose tables or views change must be bootstrapped."""
        return self.base is not None and self.diff.has_program_changes

    @property
    def pending(self) -> PendingChange:
        """What a manifest records of the change it awaits or bootstraps (`Manifest.pending`):
        `approve` applies the same selection."""
        return PendingChange(self.desired_fingerprint,
                             self.selection.document() if self.selection else None)

    def sql_changes(self) -> list[dict[str, str]]:
        """Old and new SQL text of every added, modified or removed relation, for reviews."""
        changes = []
        for section, kind in (("tables", "table"), ("views", "view")):
            for name, change in getattr(self.diff, section).items():
                if change == "unchanged":
                    continue
                old = self.diff.old[section].get(name, {}).get("sql", "")
                new = self.diff.new[section].get(name, {}).get("sql", "")
                changes.append({"kind": kind, "name": name, "change": change,
                                "old": old, "new": new})
        return changes

    def planned(self) -> PlannedPipeline:
        """The pipeline's entry of the plan artifact: what a reviewer approves."""
        return PlannedPipeline(
            name=self.name, base=self.base, desired_fingerprint=self.desired_fingerprint,
            diff=self.diff.summary, actions=self.actions,
            bootstrap_required=self.bootstrap_required, has_changes=self.has_changes,
            notes=self.notes, refusals=self.refusals, settings=self.settings,
            bootstrap_policy=self.bootstrap_policy, publish=self.publish,
            selection=self.selection, left_out=self.left_out,
            graph={name: entry.get("reads", []) for section in ("tables", "views")
                   for name, entry in {**self.diff.old[section],
                                       **self.diff.new[section]}.items()},
            sql_changes=tuple(self.sql_changes()), deepdiff=self.diff.raw)


def assemble_plan(pipelines: list[PipelinePlan], project_dir: Path,
                  orphaned: list[dict[str, Any]] | None = None) -> Plan:
    """The plan of `pipelines`, made now from the specs at `project_dir`'s commit, with
    `orphaned`: the pipelines the backend holds and the project no longer has
    (`planner.orphaned_pipelines`), beside them and outside the plan's id."""
    return Plan.of([pipeline.planned() for pipeline in pipelines], utc_now(),
                   git_info(project_dir), orphaned or ())


def git_info(project_dir: Path) -> dict[str, Any] | None:
    """The commit the specs come from and whether the work tree had local edits
    (asked of git without obeying anything a pull request committed: `reconciler.support.git`)."""
    commit = checked_out_commit(project_dir)
    return {"sha": commit.sha, "dirty": commit.dirty} if commit else None


def desired_fingerprint(program: Program, selection: Selection | None) -> str:
    """What a plan's `desired_fingerprint` names: the specs, and the selection when there is
    one, so that a saved plan, a resumed bootstrap or an approval is refused when either
    differs from what the reviewer saw."""
    if selection is None:
        return program.fingerprint
    return stable_hash({"program": program.fingerprint, "selection": selection.document()})


def plan_pipeline(program: Program, manifest: Manifest | None, etag: str | None,
                  settings: dict[str, str] | None = None,
                  extra_notes: tuple[str, ...] = (),
                  selection: Selection | None = None) -> PipelinePlan:
    """Diff `program` against the committed manifest and decide every object's action.

    `settings` (a summary of reconcile.yaml), the program's bootstrap policy and where it
    is published (`publish:`, named in a note) are part of the plan, so plan_id changes
    when they do, and settings changed since the
    last apply are named in a note. `extra_notes` are the caller's (the Action says
    where a setting came from when the pull request asks for another). A `selection`
    narrows the plan to the objects it names (`plan.selection`).
    """
    lineage_of = program.analysis.lookup if program.analysis else view_lineage
    diff = diff_programs(manifest.program if manifest else None, program.document(),
                         lineage_of)
    base = (Base(manifest.lineage, manifest.serial, etag or "", manifest.status)
            if manifest else None)
    narrowed = None
    if selection is not None:
        if manifest is None:
            raise ReconcileError(f"pipeline '{program.pipeline}' is not deployed yet: apply "
                                 "it whole before selecting parts of it (--select)")
        narrowed = narrow(diff, manifest.program, selection, lineage_of)
        diff = narrowed.diff
    actions = (*relation_actions(diff, program), *connector_actions(diff))
    if narrowed is not None:
        actions = narrowed.actions(actions)
    return PipelinePlan(name=program.pipeline, base=base,
                        desired_fingerprint=desired_fingerprint(program, selection), diff=diff,
                        actions=actions,
                        notes=(*_notes(diff, manifest),
                               *(narrowed.notes() if narrowed else ()),
                               *_publish_notes(program), *_settings_notes(manifest, settings),
                               *_spark_notes(manifest, settings), *extra_notes),
                        refusals=tuple(_refusals(diff)), settings=settings,
                        bootstrap_policy=program.bootstrap_policy,
                        publish=program.publish.model_dump() if program.publish else None,
                        selection=selection,
                        left_out=narrowed.left_out if narrowed else ())


def _notes(diff: ProgramDiff, manifest: Manifest | None) -> list[str]:
    notes: list[str] = []
    if manifest is None:
        return ["new pipeline: everything is created"]
    recorded = manifest.engine.get("spark")
    if recorded and recorded != spark_version():
        notes.append(f"Spark {recorded} -> {spark_version()}: an engine upgrade alone "
                     "recomputes nothing")
    if manifest.status == Status.AWAITING_APPROVAL:
        notes.append(f"serial {manifest.serial} is awaiting approval")
    if manifest.status == Status.FAILED:
        details = manifest.status_details
        error = details.get("error") if isinstance(details, dict) else None
        notes.append(f"last apply failed: {public_message(ReconcileError(str(error)))}"
                     if error else "last apply failed")
    for section, kind in (("tables", "table"), ("views", "view")):
        for name, change in getattr(diff, section).items():
            if change != "unchanged" or name in diff.renamed or \
                    diff.old[section][name].get("sql") == diff.new[section][name].get("sql"):
                continue
            followed = [read for read in diff.new[section][name].get("reads", [])
                        if read in diff.renamed]
            notes.append(f"{kind} {name}: reads renamed {', '.join(followed)}, nothing to "
                         "recompute" if followed else
                         f"{kind} {name}: comments or formatting only, nothing to recompute")
    for name in diff.handling_changes:
        notes += [f"connector {name}: {change}, no reset"
                  for change in handling_descriptions(diff, name)]
    return notes


def _publish_notes(program: Program) -> list[str]:
    if program.publish is None:
        return []
    left_out = (f" (except {', '.join(program.publish.exclude)})"
                if program.publish.exclude else "")
    return [f"publishes its materialized tables and views{left_out} as views in catalog "
            f"database '{program.publish.database}' after each commit"]


def _settings_notes(manifest: Manifest | None, settings: dict[str, str] | None) -> list[str]:
    if manifest is None or manifest.settings is None or settings is None:
        return []
    changed = sorted(key for key in {*manifest.settings, *settings}
                     if manifest.settings.get(key) != settings.get(key))
    if not changed:
        return []
    shown = "; ".join(f"{key}: {manifest.settings.get(key, '(unset)')} -> "
                      f"{settings.get(key, '(unset)')}" for key in changed)
    return [f"reconcile.yaml settings changed since the last apply: {shown} "
            "(review them: they run with the pipeline's credentials)"]


def _spark_notes(manifest: Manifest | None, settings: dict[str, str] | None) -> list[str]:
    """Where the pipeline last ran, when that was not what reconcile.yaml says (the apply
    had --spark-master/--spark-remote): the approver should know which cluster holds it."""
    recorded = manifest.engine.get("spark_target") if manifest is not None else None
    if not recorded or settings is None or manifest is None:
        return []
    keys = ("spark.remote", "spark.master")
    if manifest.settings is not None and any(
            manifest.settings.get(key) != settings.get(key) for key in keys):
        return []  # the settings note already shows the change
    configured = (settings.get("spark.remote") or settings.get("spark.master")
                  or "embedded (local)")
    if configured == recorded:
        return []
    return [f"last applied with Spark at {recorded}; reconcile.yaml says {configured} "
            "(apply's --spark-master/--spark-remote override it)"]


def _refusals(diff: ProgramDiff) -> list[str]:
    """Bootstrapping reads unchanged tables' state, which non-materialized tables don't keep;
    and a reset must not append again what its table keeps (`plan.rereads`)."""
    if not diff.old.get("views") and not diff.old.get("tables"):
        return []
    return [*_unmaterialized_refusals(diff), *reread_refusals(diff)]


def _unmaterialized_refusals(diff: ProgramDiff) -> list[str]:
    needs: dict[str, list[str]] = {}
    for name, change in diff.views.items():
        if change not in ("added", "modified"):
            continue
        for read in diff.new["views"][name]["reads"]:
            table = diff.new["tables"].get(read)
            if table is not None and diff.tables[read] == "unchanged" \
                    and not table["materialized"]:
                needs.setdefault(read, []).append(name)
    return [f"table {table} has 'materialized'='false' but views {', '.join(sorted(views))} "
            "need its contents to bootstrap; make it materialized or reset the pipeline"
            for table, views in sorted(needs.items())]
