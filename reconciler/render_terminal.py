"""Render a plan document on a terminal, Terraform style: `+` create, `~` change, `-` drop."""

from __future__ import annotations

from collections import Counter
from typing import Any

from rich.console import Console
from rich.markup import escape

SYMBOLS = {"create": ("+", "green"), "recompute": ("~", "yellow"), "truncate": ("~", "yellow"),
           "reset": ("~", "yellow"), "drop": ("-", "red"), "keep": (" ", "dim")}
COUNTED = ("create", "recompute", "truncate", "reset", "drop")


def summary_line(pipeline: dict[str, Any]) -> str:
    counts = Counter(action["action"] for action in pipeline["actions"])
    return ", ".join(f"{counts[kind]} to {kind}" for kind in COUNTED)


def render_plan(plan: dict[str, Any], console: Console) -> None:
    """Print every pipeline's changed objects with their reasons, then notes and refusals."""
    for pipeline in plan["pipelines"]:
        base = pipeline["base"]
        where = (f"serial {base['serial']}, status {base['status']}" if base
                 else "not deployed yet")
        console.print(f"[bold]Pipeline {escape(pipeline['name'])}[/bold] ({where})")
        if not pipeline["has_changes"]:
            console.print("  No changes. The pipeline matches its specs.")
        for action in pipeline["actions"]:
            if action["action"] == "keep" and not action["reasons"]:
                continue
            symbol, colour = SYMBOLS[action["action"]]
            kind = action["kind"].replace("_", " ")
            reasons = "; ".join(action["reasons"])
            console.print(f"  [{colour}]{symbol} {kind} {escape(action['name'])}[/{colour}]"
                          f"  [bold]{action['action']}[/bold]"
                          + (f"  [dim]{escape(reasons)}[/dim]" if reasons else ""))
        for note in pipeline["notes"]:
            console.print(f"  [cyan]note:[/cyan] {escape(note)}")
        for refusal in pipeline["refusals"]:
            console.print(f"  [red]refused:[/red] {escape(refusal)}")
        if pipeline["has_changes"]:
            console.print(f"  Plan: {summary_line(pipeline)}.")
    console.print(f"[dim]plan_id {plan['plan_id']}[/dim]")
