"""Render a plan document on a terminal, Terraform style: `+` create, `~` change, `-` drop.

The whole plan is assembled as one styled `Text` and printed once: per-line
markup parsing made printing a 1,000-view plan cost as much as computing it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.text import Text

SYMBOLS = {"create": ("+", "green"), "recompute": ("~", "yellow"), "truncate": ("~", "yellow"),
           "reset": ("~", "yellow"), "drop": ("-", "red"), "keep": (" ", "dim")}
COUNTED = ("create", "recompute", "truncate", "reset", "drop")


def summary_line(pipeline: dict[str, Any]) -> str:
    counts = Counter(action["action"] for action in pipeline["actions"])
    return ", ".join(f"{counts[kind]} to {kind}" for kind in COUNTED)


def is_shown(action: dict[str, Any]) -> bool:
    """Unchanged objects are left out, unless there is something to say about them (a
    connector kept with changed throughput options, say)."""
    return action["action"] != "keep" or bool(action["reasons"]) or "options_changed" in action


def option_lines(action: dict[str, Any]) -> list[str]:
    """Each option of a new or changed connector: `key = value`, or `key: old -> new`."""
    changed = action.get("options_changed", {})
    lines = {key: f"{key}: {_or_unset(change['old'])} -> {_or_unset(change['new'])}"
             for key, change in changed.items()}
    lines.update({key: f"{key} = {value}" for key, value in action.get("options", {}).items()
                  if key not in changed})
    return [lines[key] for key in sorted(lines)]


def _or_unset(value: str | None) -> str:
    return "(unset)" if value is None else value


def render_plan(plan: dict[str, Any], console: Console) -> None:
    """Print every pipeline's changed objects with their reasons, then notes and refusals."""
    text = Text()
    for pipeline in plan["pipelines"]:
        base = pipeline["base"]
        where = (f"serial {base['serial']}, status {base['status']}" if base
                 else "not deployed yet")
        text.append(f"Pipeline {pipeline['name']}", "bold").append(f" ({where})\n")
        if not pipeline["has_changes"]:
            text.append("  No changes. The pipeline matches its specs.\n")
        for action in pipeline["actions"]:
            if not is_shown(action):
                continue
            symbol, colour = SYMBOLS[action["action"]]
            kind = action["kind"].replace("_", " ")
            text.append(f"  {symbol} {kind} {action['name']}", colour)
            text.append(f"  {action['action']}", "bold")
            if action["reasons"]:
                text.append("  " + "; ".join(action["reasons"]), "dim")
            if action.get("refresh") and action["action"] != "drop":
                text.append(f"  [{action['refresh']}]", "dim")
            text.append("\n")
            for line in option_lines(action):
                text.append(f"      option {line}\n", "dim")
        for note in pipeline["notes"]:
            text.append("  note: ", "cyan").append(f"{note}\n")
        for refusal in pipeline["refusals"]:
            text.append("  refused: ", "red").append(f"{refusal}\n")
        if pipeline["has_changes"]:
            text.append(f"  Plan: {summary_line(pipeline)}.\n")
    text.append(f"plan_id {plan['plan_id']}", "dim")
    console.print(text)
