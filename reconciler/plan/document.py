"""Turn a program diff into a plan: one action per object, with human reasons.

The plan artifact is a contract (see DESIGN.md): `plan_id` is the SHA-256 of
the canonical plan body, so two plans of the same inputs against the same base
have the same id, and `apply` can refuse a plan that no longer matches the
backend (base lineage and serial) or the specs (desired fingerprint).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from reconciler.errors import ReconcileError, public_message
from reconciler.manifest import Manifest, spark_version, utc_now
from reconciler.plan.diff import ProgramDiff, diff_programs
from reconciler.redact import redact_text
from reconciler.spec.evolution import evolution
from reconciler.spec.fingerprint import stable_hash
from reconciler.spec.program import Program

PLAN_FORMAT = 1
ActionKind = Literal["create", "recompute", "evolve", "rename", "truncate", "drop", "reset",
                     "keep"]
ObjectKind = Literal["table", "view", "input_connector", "output_connector"]


@dataclass(frozen=True)
class Action:
    kind: ObjectKind
    name: str
    action: ActionKind
    reasons: tuple[str, ...] = ()
    refresh: str | None = None  # views: how each step keeps it (`maintained incrementally`)
    source: str | None = None  # rename: the old name (`from` in the plan's JSON)

    def document(self) -> dict[str, Any]:
        document = {"kind": self.kind, "name": self.name, "action": self.action,
                    "reasons": list(self.reasons)}
        if self.refresh is not None:
            document["refresh"] = self.refresh
        if self.source is not None:
            document["from"] = self.source
        return document


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

    @property
    def has_changes(self) -> bool:
        return self.base is None or self.diff.has_changes

    @property
    def bootstrap_required(self) -> bool:
        """A deployed pipeline whose tables or views change must be bootstrapped."""
        return self.base is not None and self.diff.has_program_changes

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

    def document(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "base": self.base.document() if self.base else None,
            "desired_fingerprint": self.desired_fingerprint,
            "diff": self.diff.status_details(),
            "actions": [action.document() for action in self.actions],
            "bootstrap_required": self.bootstrap_required,
            "has_changes": self.has_changes,
            "notes": list(self.notes),
            "refusals": list(self.refusals),
            "settings": self.settings,
            "bootstrap_policy": self.bootstrap_policy,
            "graph": {name: entry.get("reads", []) for section in ("tables", "views")
                      for name, entry in {**self.diff.old[section],
                                          **self.diff.new[section]}.items()},
            "sql_changes": self.sql_changes(),
            "deepdiff": self.diff.raw,
        }


# Derived or bulky parts of a pipeline's plan that do not define it: left out of plan_id.
_NOT_HASHED = ("deepdiff", "sql_changes", "graph")


def plan_body_hash(pipelines: list[dict[str, Any]]) -> str:
    """plan_id: the hash of what the plan would do, not of when or where it was made."""
    return stable_hash({"format_version": PLAN_FORMAT, "pipelines": [
        {k: v for k, v in pipeline.items() if k not in _NOT_HASHED} for pipeline in pipelines]})


def plan_document(pipelines: list[PipelinePlan], project_dir: Path) -> dict[str, Any]:
    """The plan artifact of DESIGN.md."""
    bodies = [pipeline.document() for pipeline in pipelines]
    return {"format_version": PLAN_FORMAT, "plan_id": plan_body_hash(bodies),
            "created_at": utc_now(), "git": git_info(project_dir), "pipelines": bodies}


def verify_plan_id(document: dict[str, Any], where: str) -> None:
    """Refuse a plan file whose body was edited after it was written."""
    if document.get("format_version") != PLAN_FORMAT:
        raise ReconcileError(f"plan format {document.get('format_version')!r} is not supported",
                             file=where)
    if plan_body_hash(document.get("pipelines", [])) != document.get("plan_id"):
        raise ReconcileError("plan_id does not match the plan's contents: the file was edited",
                             file=where)


def git_info(project_dir: Path) -> dict[str, Any] | None:
    """The commit the specs come from and whether the work tree had local edits."""
    def git(*args: str) -> str | None:
        try:
            result = subprocess.run(["git", "-C", str(project_dir), *args], capture_output=True,
                                    text=True, check=False, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return result.stdout.strip() if result.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    if sha is None:
        return None
    status = git("status", "--porcelain", "--", ".")
    return {"sha": sha, "dirty": bool(status)}


def plan_pipeline(program: Program, manifest: Manifest | None, etag: str | None,
                  settings: dict[str, str] | None = None,
                  extra_notes: tuple[str, ...] = ()) -> PipelinePlan:
    """Diff `program` against the committed manifest and decide every object's action.

    `settings` (a summary of reconcile.yaml) and the program's bootstrap policy are
    part of the plan, so plan_id changes when they do, and settings changed since the
    last apply are named in a note. `extra_notes` are the caller's (the Action says
    where a setting came from when the pull request asks for another).
    """
    diff = diff_programs(manifest.program if manifest else None, program.document())
    base = (Base(manifest.lineage, manifest.serial, etag or "", manifest.status)
            if manifest else None)
    actions = (*_relation_actions(diff, program), *_connector_actions(diff))
    return PipelinePlan(name=program.pipeline, base=base,
                        desired_fingerprint=program.fingerprint, diff=diff, actions=actions,
                        notes=(*_notes(diff, manifest), *_settings_notes(manifest, settings),
                               *_spark_notes(manifest, settings), *extra_notes),
                        refusals=tuple(_refusals(diff)), settings=settings,
                        bootstrap_policy=program.bootstrap_policy)


def _relation_actions(diff: ProgramDiff, program: Program) -> list[Action]:
    return [_renamed(diff, action) if action.name in diff.renamed else action
            for action in _change_actions(diff, program)]


def _renamed(diff: ProgramDiff, action: Action) -> Action:
    """A renamed relation's action: `rename`, saying what else happens to it."""
    old = diff.renamed[action.name]
    if action.action == "keep":
        reasons = (f"renamed from {old}: its Delta table moves with its history; nothing is "
                   "recomputed or re-ingested", *action.reasons)
    else:
        reasons = (f"renamed from {old}", f"and {action.action}: " + "; ".join(action.reasons))
    return Action(action.kind, action.name, "rename", reasons, action.refresh, source=old)


def _change_actions(diff: ProgramDiff, program: Program) -> list[Action]:
    actions = []
    for name in _ordered(diff):
        kind: ObjectKind = "table" if name in diff.tables else "view"
        section = "tables" if kind == "table" else "views"
        change = getattr(diff, section)[name]
        view = program.views.get(name)
        refresh = view.refresh.describe() if view is not None else None
        if change == "added":
            actions.append(Action(kind, name, "create", (f"new {kind}",), refresh))
        elif change == "removed":
            actions.append(Action(kind, name, "drop", (f"{kind} removed: its state is discarded",)))
        elif change == "modified" and kind == "table":
            evolved = evolution(diff.old["tables"][name], diff.new["tables"][name])
            if evolved.possible:
                actions.append(Action(kind, name, "evolve", (
                    *evolved.describe(), "rows kept; input connectors keep their offsets")))
            else:
                actions.append(Action(kind, name, "truncate", (
                    *_table_reasons(diff, name), f"cannot evolve in place: {evolved.reason}",
                    "contents truncated; input connectors reset and re-ingest")))
        elif change == "modified":
            actions.append(Action(kind, name, "recompute", tuple(_view_reasons(diff, name)),
                                  refresh))
        elif name in diff.refresh_changes:
            actions.append(Action(kind, name, "keep", (
                "refresh changes: " + " -> ".join(_MODES[mode] for mode in
                                                   diff.refresh_changes[name])
                + "; nothing is recomputed now",), refresh))
        else:
            actions.append(Action(kind, name, "keep", (), refresh))
    return actions


_MODES = {"incremental": "maintained incrementally", "full": "recomputed each step"}


def _ordered(diff: ProgramDiff) -> list[str]:
    """Relations in the desired evaluation order, then removed ones by name."""
    order = list(diff.new.get("order", []))
    known = set(order)
    return order + sorted(n for n in (*diff.tables, *diff.views) if n not in known)


def _table_reasons(diff: ProgramDiff, name: str) -> list[str]:
    old, new = diff.old["tables"][name], diff.new["tables"][name]
    reasons = []
    old_columns = {c["name"]: c for c in old["columns"]}
    new_columns = {c["name"]: c for c in new["columns"]}
    for column in new_columns.keys() - old_columns.keys():
        reasons.append(f"column {column} added: {new_columns[column]['type']}")
    for column in old_columns.keys() - new_columns.keys():
        reasons.append(f"column {column} removed")
    for column in sorted(old_columns.keys() & new_columns.keys()):
        before, after = old_columns[column], new_columns[column]
        if before["type"] != after["type"]:
            reasons.append(f"column {column}: {before['type']} -> {after['type']}")
        if before["nullable"] != after["nullable"]:
            reasons.append(f"column {column}: " + ("NOT NULL dropped" if after["nullable"]
                                                   else "NOT NULL added"))
    common_old = [c for c in old_columns if c in new_columns]
    common_new = [c for c in new_columns if c in old_columns]
    if common_old != common_new:
        reasons.append("column order changed")
    if old["primary_key"] != new["primary_key"]:
        reasons.append(f"primary key ({', '.join(old['primary_key'])}) -> "
                       f"({', '.join(new['primary_key'])})")
    if old["materialized"] != new["materialized"]:
        reasons.append(f"'materialized' {str(old['materialized']).lower()} -> "
                       f"{str(new['materialized']).lower()}")
    return reasons


def _view_reasons(diff: ProgramDiff, name: str) -> list[str]:
    fields = diff.fields("views", name)
    old, new = diff.old["views"][name], diff.new["views"][name]
    reasons = []
    if "query" in fields:
        reasons.append("query changed")
    if "materialized" in fields:
        reasons.append("MATERIALIZED added" if new["materialized"] else "MATERIALIZED removed")
    for read in new["reads"]:
        kind = "table" if read in diff.new["tables"] else "view"
        change = getattr(diff, f"{kind}s").get(read)
        if read in diff.rows_reset:
            reasons.append(f"reads {'truncated table' if kind == 'table' else 'reset view'} "
                           f"{read}")
        elif change == "added" and read in old["reads"]:
            reasons.append(f"reads re-created {kind} {read}")
    if "query" not in fields:
        reasons += _column_reasons(diff, old.get("lineage") or {}, new.get("lineage") or {})
    return reasons or ["definition changed"]


def _column_reasons(diff: ProgramDiff, old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """What changed among the columns (and rows) a view reads, in its readers' words:
    `reads orders.amount: DECIMAL(10,2) -> DECIMAL(12,2)`."""
    before, after = old.get("reads", {}), new.get("reads", {})
    rows_changed = {key for key in before.keys() & after.keys()
                    if "." not in key and before[key] != after[key]}
    reasons = [f"reads modified view {relation}" for relation in sorted(rows_changed)]
    for key in sorted({*before, *after}):
        relation, _, column = key.partition(".")
        if before.get(key) == after.get(key) or relation in rows_changed or not column:
            continue
        if key not in before:
            reasons.append(f"reads new column {key}" if column != "*" else f"reads {relation}")
        elif key not in after:
            reasons.append(f"column {key} it read is gone")
        elif column == "*":
            reasons.append(f"reads all of modified {relation}")
        elif relation in diff.new["tables"] and relation in diff.old["tables"]:
            reasons.append(f"reads {key}: {_column_type(diff.old, relation, column)} -> "
                           f"{_column_type(diff.new, relation, column)}")
        else:
            reasons.append(f"reads {key}, whose definition changed")
    return reasons


def _column_type(document: dict[str, Any], table: str, column: str) -> str:
    entry = next(c for c in document["tables"][table]["columns"] if c["name"] == column)
    return entry["type"] + ("" if entry["nullable"] else " NOT NULL")


def _connector_actions(diff: ProgramDiff) -> list[Action]:
    actions = []
    for name, change in diff.connectors.items():
        document = (diff.old if change == "removed" else diff.new)["connectors"][name]
        direction, relation = document["direction"], document["relation"]
        kind: ObjectKind = f"{direction}_connector"  # type: ignore[assignment]
        relation_change = (diff.tables.get(relation) or diff.views.get(relation) or "removed")
        if change == "removed":
            reason = (f"{relation} removed" if relation_change == "removed" else
                      f"rows it ingested stay in {relation}" if direction == "input" else
                      "stops receiving changes")
            actions.append(Action(kind, name, "drop", (reason,)))
        elif change == "added":
            actions.append(Action(kind, name, "create", (_new_connector_reason(
                direction, relation, relation_change), _where(document))))
        elif change == "modified":
            changed = sorted(diff.fields("connectors", name))
            suffix = "; rows already ingested stay" if direction == "input" else ""
            old = diff.old["connectors"][name]
            actions.append(Action(kind, name, "reset", tuple(
                f"path {redact_text(str(old.get('path')))} -> "
                f"{redact_text(str(document.get('path')))}{suffix}" if field == "path"
                else f"{field} changed{suffix}" for field in changed)))
        elif direction == "input" and relation_change == "modified" and evolution(
                diff.old["tables"][relation], diff.new["tables"][relation]).possible:
            actions.append(Action(kind, name, "keep", (
                f"table {relation} evolves in place: offsets kept, new input carries its "
                "new columns",)))
        elif direction == "input" and relation_change in ("modified", "added"):
            actions.append(Action(kind, name, "reset",
                                  (f"table {relation} truncated: re-ingest from the start",)))
        elif direction == "output" and relation_change in ("modified", "added"):
            actions.append(Action(kind, name, "keep", (
                f"receives the full contents of recomputed {relation}"
                if document.get("snapshot_on_bootstrap") else
                f"receives the rows of recomputed {relation} that change (_op delete/insert; "
                "the full contents if its columns change)",)))
        elif relation in diff.renamed:
            actions.append(Action(kind, name, "keep", (
                f"follows {relation} (renamed from {diff.renamed[relation]})"
                + ("; offsets kept" if direction == "input" else ""),)))
        else:
            actions.append(Action(kind, name, "keep"))
    return actions


def _where(connector: dict[str, Any]) -> str:
    """Where a connector reads or writes, for the approver to see (URLs redacted)."""
    verb = "reads" if connector["direction"] == "input" else "writes"
    return f"{verb} {connector.get('type')} at {redact_text(str(connector.get('path')))}"


def _new_connector_reason(direction: str, relation: str, relation_change: str) -> str:
    if direction == "input":
        return f"starts ingesting into {relation} after bootstrapping"
    if relation_change in ("added", "modified"):
        return f"receives the full contents of {relation}"
    return f"receives only later changes of unchanged {relation}"


def _notes(diff: ProgramDiff, manifest: Manifest | None) -> list[str]:
    notes: list[str] = []
    if manifest is None:
        return ["new pipeline: everything is created"]
    recorded = manifest.engine.get("spark")
    if recorded and recorded != spark_version():
        notes.append(f"Spark {recorded} -> {spark_version()}: an engine upgrade alone "
                     "recomputes nothing")
    if manifest.status == "AwaitingApproval":
        notes.append(f"serial {manifest.serial} is awaiting approval")
    if manifest.status == "Failed":
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
    for name, change in diff.connectors.items():
        if change != "unchanged":
            continue
        before = diff.old["connectors"][name].get("throughput_options")
        after = diff.new["connectors"][name].get("throughput_options")
        if before != after:
            notes.append(f"connector {name}: throughput options changed, no reset")
    return notes


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
    """Bootstrapping reads unchanged tables' state, which non-materialized tables don't keep."""
    if not diff.old.get("views") and not diff.old.get("tables"):
        return []
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
