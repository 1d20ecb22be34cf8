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
            if action["action"] == "keep" and not action["reasons"]:
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
        for note in pipeline["notes"]:
            text.append("  note: ", "cyan").append(f"{note}\n")
        for refusal in pipeline["refusals"]:
            text.append("  refused: ", "red").append(f"{refusal}\n")
        if pipeline["has_changes"]:
            text.append(f"  Plan: {summary_line(pipeline)}.\n")
    text.append(f"plan_id {plan['plan_id']}", "dim")
    console.print(text)
