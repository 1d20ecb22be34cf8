"""The plan as one frozen object, from the planner to the JSON written out and back.

A plan crosses layers (the CLI, the Action, operations) as a `Plan`: its pipelines'
entries are typed (`PlannedPipeline`, its actions `plan.actions.Action`), so no caller
reads the artifact's JSON by key. It becomes the JSON document (docs/concepts.md) only
where it is written out (`plan --out/--json`, `show`, the Action's artifact), and a saved
plan file becomes a `Plan` again where it is read (`load_plan_file`), after its `plan_id`
is checked against the body as written.

`plan_id` is the SHA-256 of the canonical body, computed from the JSON each entry writes,
so an entry parsed back from a file and written again hashes the same.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from reconciler.desired.model.fingerprint import stable_hash
from reconciler.plan.actions import Action
from reconciler.plan.diff_summary import DiffSummary
from reconciler.plan.preview_report import PipelinePreview
from reconciler.plan.selection import Selection
from reconciler.plan.view_test_report import ViewTestReport
from reconciler.support.errors import ReconcileError

PLAN_FORMAT = 1

# Derived or bulky parts of a pipeline's plan that do not define it: left out of plan_id
# (a data preview describes the data at the base serial, not what the plan would do).
_NOT_HASHED = ("deepdiff", "sql_changes", "graph", "preview", "tests")


@dataclass(frozen=True)
class Base:
    """The committed manifest a plan was computed against (None for a new pipeline)."""

    lineage: str
    serial: int
    etag: str
    status: str

    def document(self) -> dict[str, Any]:
        return {"lineage": self.lineage, "serial": self.serial, "etag": self.etag,
                "status": self.status}

    @classmethod
    def from_document(cls, document: Mapping[str, Any] | None) -> Base | None:
        if document is None:
            return None
        return cls(document["lineage"], document["serial"], document["etag"],
                   document["status"])


@dataclass(frozen=True)
class PlannedPipeline:
    """One pipeline's entry of a plan, as the reviewer saw it: what `apply` of a saved plan
    checks the backend and the specs against, and what the renderings show.

    The diff's summary, the data preview and the view tests are typed (`DiffSummary`,
    `PipelinePreview`, `ViewTestReport`); the graph, SQL changes and deepdiff stay the JSON
    they are written as: only renderings read them, each as a whole.
    """

    name: str
    base: Base | None
    desired_fingerprint: str
    diff: DiffSummary
    actions: tuple[Action, ...]
    bootstrap_required: bool
    has_changes: bool
    notes: tuple[str, ...]
    refusals: tuple[str, ...]
    settings: Mapping[str, str] | None
    bootstrap_policy: str | None  # None: a plan saved before plans recorded it
    publish: Mapping[str, Any] | None
    selection: Selection | None
    left_out: tuple[str, ...]
    graph: Mapping[str, list[str]]
    sql_changes: tuple[Mapping[str, str], ...]
    deepdiff: Any
    preview: PipelinePreview | None = None  # `operations.preview`, added after planning
    tests: ViewTestReport | None = None  # the Action's view tests, added after planning

    def document(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "base": self.base.document() if self.base else None,
            "desired_fingerprint": self.desired_fingerprint,
            "diff": self.diff.document(),
            "actions": [action.document() for action in self.actions],
            "bootstrap_required": self.bootstrap_required,
            "has_changes": self.has_changes,
            "notes": list(self.notes),
            "refusals": list(self.refusals),
            "settings": self.settings,
            "bootstrap_policy": self.bootstrap_policy,
            "publish": self.publish,
            **({"selection": {**self.selection.document(), "left_out": list(self.left_out)}}
               if self.selection else {}),
            "graph": self.graph,
            "sql_changes": list(self.sql_changes),
            "deepdiff": self.deepdiff,
            **({"preview": self.preview.document()} if self.preview is not None else {}),
            **({"tests": self.tests.document()} if self.tests is not None else {}),
        }

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> PlannedPipeline:
        """A saved plan's entry (`document`'s inverse). Parts a plan saved by an older
        version may lack are None or empty; what apply checks is always there."""
        selection = document.get("selection")
        return cls(
            name=document["name"], base=Base.from_document(document["base"]),
            desired_fingerprint=document["desired_fingerprint"],
            diff=DiffSummary.from_document(document["diff"]),
            actions=tuple(Action.from_document(action) for action in document["actions"]),
            bootstrap_required=document["bootstrap_required"],
            has_changes=document["has_changes"], notes=tuple(document["notes"]),
            refusals=tuple(document["refusals"]), settings=document.get("settings"),
            bootstrap_policy=document.get("bootstrap_policy"),
            publish=document.get("publish"), selection=Selection.from_document(selection),
            left_out=tuple((selection or {}).get("left_out", ())),
            graph=document.get("graph", {}), sql_changes=tuple(document.get("sql_changes", ())),
            deepdiff=document.get("deepdiff"),
            preview=PipelinePreview.from_document(document.get("preview")),
            tests=ViewTestReport.from_document(document.get("tests")))


@dataclass(frozen=True)
class Plan:
    """The plan artifact: every planned pipeline, the backend's orphans, and the id."""

    plan_id: str
    created_at: str
    git: Mapping[str, Any] | None  # `document.git_info`: the commit the specs come from
    pipelines: tuple[PlannedPipeline, ...]
    # Pipelines the backend holds and the project no longer has (`orphaned_pipelines`); no
    # apply acts on them (only `reconcile destroy` does), so they are outside the plan's id.
    orphaned: tuple[Mapping[str, Any], ...] = ()
    # Relations changed outside the reconciler since their pipeline's last commit
    # (`operations.drift`: pipeline, relation, version, reason): what an apply or step will
    # meet, not part of what it does, so outside the id too.
    drift: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def of(cls, pipelines: Sequence[PlannedPipeline], created_at: str,
           git: Mapping[str, Any] | None,
           orphaned: Sequence[Mapping[str, Any]] = ()) -> Plan:
        """A new plan, its id hashed from its pipelines' entries as they are written."""
        return cls(plan_body_hash([pipeline.document() for pipeline in pipelines]),
                   created_at, git, tuple(pipelines), tuple(orphaned))

    def document(self) -> dict[str, Any]:
        """The JSON artifact (docs/concepts.md), as `plan --out` writes it."""
        return {"format_version": PLAN_FORMAT, "plan_id": self.plan_id,
                "created_at": self.created_at, "git": self.git,
                "pipelines": [pipeline.document() for pipeline in self.pipelines],
                "orphaned": list(self.orphaned), "drift": list(self.drift)}

    @classmethod
    def from_document(cls, document: Mapping[str, Any], where: str) -> Plan:
        """A saved plan, refused when its body was edited after it was written (`where`
        names the file in the error)."""
        if document.get("format_version") != PLAN_FORMAT:
            raise ReconcileError(
                f"plan format {document.get('format_version')!r} is not supported", file=where)
        if plan_body_hash(document.get("pipelines", [])) != document.get("plan_id"):
            raise ReconcileError("plan_id does not match the plan's contents: the file was "
                                 "edited", file=where)
        try:
            return cls(document["plan_id"], document.get("created_at", ""), document.get("git"),
                       tuple(PlannedPipeline.from_document(entry)
                             for entry in document.get("pipelines", [])),
                       tuple(document.get("orphaned") or ()),
                       tuple(document.get("drift") or ()))
        except (KeyError, TypeError, AttributeError) as error:  # hashed, yet not a plan
            raise ReconcileError(f"not a plan file: {type(error).__name__} {error}",
                                 file=where) from None

    def pipeline(self, name: str) -> PlannedPipeline | None:
        return next((pipeline for pipeline in self.pipelines if pipeline.name == name), None)

    @property
    def changed(self) -> list[str]:
        """The pipelines with changes, in the plan's order."""
        return [pipeline.name for pipeline in self.pipelines if pipeline.has_changes]

    @property
    def selection(self) -> Selection | None:
        """The `--select` the plan was made with (one pipeline's at most)."""
        return next((p.selection for p in self.pipelines if p.selection is not None), None)

    def with_previews(self, by_pipeline: Mapping[str, PipelinePreview]) -> Plan:
        """The plan with a data preview attached to the pipelines named in `by_pipeline`:
        it describes the data, not the plan, so the id stays."""
        return replace(self, pipelines=tuple(
            replace(p, preview=by_pipeline[p.name]) if p.name in by_pipeline else p
            for p in self.pipelines))

    def with_view_tests(self, by_pipeline: Mapping[str, ViewTestReport]) -> Plan:
        """The plan with view tests attached to the pipelines named in `by_pipeline`: they
        describe the checkout, not what an apply does, so the id stays."""
        return replace(self, pipelines=tuple(
            replace(p, tests=by_pipeline[p.name]) if p.name in by_pipeline else p
            for p in self.pipelines))


def plan_body_hash(pipelines: Sequence[Mapping[str, Any]]) -> str:
    """plan_id: the hash of what the plan would do, not of when or where it was made."""
    return stable_hash({"format_version": PLAN_FORMAT, "pipelines": [
        {k: v for k, v in pipeline.items() if k not in _NOT_HASHED} for pipeline in pipelines]})


def load_plan_file(path: Path) -> Plan:
    """Read a plan artifact, check that its plan_id still matches its body, and parse it."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise ReconcileError(f"not a readable plan file: {error}", file=path) from None
    if not isinstance(document, dict):
        raise ReconcileError("not a plan file: expected a JSON object", file=path)
    return Plan.from_document(document, str(path))
