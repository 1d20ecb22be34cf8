"""Render a plan on a terminal, Terraform style: `+` create, `~` change, `-` drop.

The whole plan is assembled as one styled `Text` and printed once: per-line
markup parsing made printing a 1,000-view plan cost as much as computing it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.text import Text

from reconciler.plan.actions import Action, ActionKind, printable
from reconciler.plan.artifact import Plan, PlannedPipeline
from reconciler.plan.preview_report import PipelinePreview

SYMBOLS = {"create": ("+", "green"), "recompute": ("~", "yellow"), "truncate": ("~", "yellow"),
           "reset": ("~", "yellow"), "drop": ("-", "red"), "keep": (" ", "dim")}
COUNTED: tuple[ActionKind, ...] = ("create", "recompute", "truncate", "reset", "drop")


def summary_line(pipeline: PlannedPipeline) -> str:
    counts = Counter(action.action for action in pipeline.actions)
    return ", ".join(f"{counts[kind]} to {kind}" for kind in COUNTED)


def is_shown(action: Action) -> bool:
    """Unchanged objects are left out, unless there is something to say about them (a
    connector kept with changed throughput options, say)."""
    return action.action != "keep" or bool(action.reasons) or bool(action.options_changed)


def option_lines(action: Action) -> list[str]:
    """Each option of a new or changed connector: `key = value`, or `key: old -> new`."""
    changed = action.options_changed or {}
    lines = {key: f"{key}: {_or_unset(change['old'])} -> {_or_unset(change['new'])}"
             for key, change in changed.items()}
    lines.update({key: f"{key} = {value}" for key, value in (action.options or {}).items()
                  if key not in changed})
    return [lines[key] for key in sorted(lines)]


def _or_unset(value: str | None) -> str:
    return "(unset)" if value is None else value


def preview_lines(preview: PipelinePreview) -> list[dict[str, str]]:
    """One row per previewed view (`reconcile.preview`): counts as text, for the terminal
    and the pull-request comment alike."""
    if preview.error is not None:
        return [{"view": "", "kind": "", "rows": "", "added": "", "removed": "", "changed": "",
                 "detail": f"no preview: {preview.error}"}]
    rows = []
    for view, entry in preview.views.items():
        if entry.unavailable is not None:
            rows.append({"view": view, "kind": entry.kind, "rows": "", "added": "",
                         "removed": "", "changed": "", "detail":
                         f"not previewed: {entry.unavailable}"})
            continue
        before = entry.rows_before
        detail = (", ".join(f"{name} {count}" for name, count in entry.changed_values.items()
                            if count) if entry.key is not None else
                  "NULLs: " + (", ".join(f"{name} {count}" for name, count in
                                         (entry.nulls or {}).items() if count) or "none")
                  if entry.kind == "new" else
                  "its columns change" if entry.columns_changed else "")
        rows.append({"view": view, "kind": entry.kind,
                     "rows": (f"{entry.rows_after}" if before is None
                              else f"{before} → {entry.rows_after}"),
                     "added": f"+{entry.added}", "removed": f"-{entry.removed}",
                     "changed": str(entry.changed) if entry.key is not None else "",
                     "detail": detail})
    return rows


def orphan_state(orphan: Mapping[str, Any]) -> str:
    """`serial 3, status Running`, or why its manifest could not be read."""
    if orphan.get("error"):
        return str(orphan["error"])
    return f"serial {orphan['serial']}, status {orphan['status']}"


SAMPLE_MARKS = {"added": "+", "removed": "-", "before": "~", "after": "→"}
SAMPLE_COLOURS = {"added": "green", "removed": "red", "before": "yellow", "after": "yellow"}
"""How a sample row shows in the terminal: added, removed, a changed row before and after."""


def render_plan(plan: Plan, console: Console) -> None:
    """Print every pipeline's changed objects with their reasons, then notes and refusals."""
    text = Text()
    for pipeline in plan.pipelines:
        base = pipeline.base
        where = (f"serial {base.serial}, status {base.status}" if base
                 else "not deployed yet")
        text.append(f"Pipeline {pipeline.name}", "bold").append(f" ({where})\n")
        if not pipeline.has_changes:
            text.append("  No changes. The pipeline matches its specs.\n")
        for action in pipeline.actions:
            if not is_shown(action):
                continue
            symbol, colour = SYMBOLS[action.action]
            kind = action.kind.replace("_", " ")
            text.append(f"  {symbol} {kind} {action.name}", colour)
            text.append(f"  {action.action}", "bold")
            if action.reasons:
                text.append("  " + "; ".join(action.reasons), "dim")
            if action.refresh and action.action != "drop":
                text.append(f"  [{action.refresh}]", "dim")
            text.append("\n")
            for line in option_lines(action):
                text.append(f"      option {line}\n", "dim")
        for note in pipeline.notes:
            text.append("  note: ", "cyan").append(f"{note}\n")
        for refusal in pipeline.refusals:
            text.append("  refused: ", "red").append(f"{refusal}\n")
        if pipeline.has_changes:
            text.append(f"  Plan: {summary_line(pipeline)}.\n")
        if pipeline.preview:
            text.append(f"  Data preview (from serial {pipeline.preview.base_serial}):\n",
                        "bold")
            for row in preview_lines(pipeline.preview):
                counts = " ".join(part for part in (
                    f"rows {row['rows']}" if row["rows"] else "", row["added"], row["removed"],
                    f"changed {row['changed']}" if row["changed"] else "") if part)
                text.append(f"    {row['kind']} view {row['view']}: {counts}")
                text.append(f"  {row['detail']}\n" if row["detail"] else "\n", "dim")
            for table in sample_tables(pipeline.preview):
                text.append(f"    sample rows of {table['view']} "
                            f"({printable(', '.join(table['columns']))}):\n", "dim")
                for kind, values in table["rows"]:
                    shown = " | ".join(printable(value) for value in values)
                    text.append(f"      {SAMPLE_MARKS[kind]} {shown}\n",
                                SAMPLE_COLOURS[kind])
    for drift in plan.drift:
        text.append(f"Drift in {drift['pipeline']}", "bold yellow").append(
            f": {drift['relation']}: {drift['reason']}\n")
    for orphan in plan.orphaned:
        text.append(f"Pipeline {orphan['name']}", "bold").append(
            f" ({orphan_state(orphan)}): not in the project; its state stays in the backend\n")
        text.append(f"  remove it with `{orphan['hint']}`\n", "dim")
    text.append(f"plan_id {plan.plan_id}", "dim")
    console.print(text)


def sample_tables(preview: PipelinePreview) -> list[dict[str, Any]]:
    """Per previewed view with sample rows: its column names and rows, each marked added,
    removed, or changed (before, then after)."""
    tables = []
    for view, entry in preview.views.items():
        samples = entry.samples
        if not samples:
            continue
        rows = [("added", row) for row in samples.get("added", [])]
        rows += [("removed", row) for row in samples.get("removed", [])]
        for pair in samples.get("changed", []):
            rows += [("before", pair["before"]), ("after", pair["after"])]
        if rows:
            columns = list(rows[0][1])
            tables.append({"view": view, "columns": columns,
                           "rows": [(kind, [row.get(c, "") for c in columns])
                                    for kind, row in rows]})
    return tables
