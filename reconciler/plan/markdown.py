"""Render a plan as Markdown for pull-request comments and step summaries.

Each pipeline gets a table of changed objects with reasons, a Mermaid graph of
the affected part of the pipeline, and a collapsible unified diff of its SQL.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2

from reconciler.plan.actions import Action
from reconciler.plan.artifact import Plan, PlannedPipeline
from reconciler.plan.terminal import (
    COUNTED,
    SYMBOLS,
    is_shown,
    option_lines,
    orphan_state,
    preview_lines,
    sample_tables,
)

_ENVIRONMENT = jinja2.Environment(
    loader=jinja2.PackageLoader("reconciler.plan", "templates"),
    undefined=jinja2.StrictUndefined,
    autoescape=False,
    trim_blocks=True,
    keep_trailing_newline=True,
)


def _inline(text: object) -> str:
    """Text from specs (paths, settings, names in reasons) as one inert Markdown line: no
    table break, no HTML (a `<!--` would hide the rest of the comment, markers included)."""
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("|", "\\|").replace("\r", " ").replace("\n", " "))


_ENVIRONMENT.filters["cell"] = _inline

NODE_STYLES = {
    "added": "fill:#d4f8d4,stroke:#2a7d2a",
    "modified": "fill:#fff3c4,stroke:#b08800",
    "removed": "fill:#fddede,stroke:#b31d28,stroke-dasharray: 4 2",
    "unchanged": "fill:#f4f4f4,stroke:#999",
}


def render_markdown(plan: Plan) -> str:
    pipelines = [_pipeline_context(p) for p in plan.pipelines]
    changed = len(plan.changed)
    title = (f"Reconcile plan: {changed} of {len(pipelines)} pipeline(s) change"
             if changed else "Reconcile plan: no changes")
    orphaned = [{**orphan, "state": orphan_state(orphan)}
                for orphan in plan.orphaned]
    return _ENVIRONMENT.get_template("plan.md.j2").render(
        title=title, pipelines=pipelines, plan_id=plan.plan_id, git=plan.git,
        orphaned=orphaned, drift=plan.drift)


def _pipeline_context(pipeline: PlannedPipeline) -> dict[str, Any]:
    counts = Counter(action.action for action in pipeline.actions)
    base = pipeline.base
    shown = [action for action in pipeline.actions if is_shown(action)]
    return {
        "name": pipeline.name,
        "status": f"serial {base.serial}" if base else "new",
        "counts": {kind: counts[kind] for kind in COUNTED},
        "has_changes": pipeline.has_changes,
        "actions": [{**action.document(), "symbol": _symbol(action),
                     "kind": action.kind.replace("_", " ")} for action in shown],
        "notes": pipeline.notes,
        "refusals": pipeline.refusals,
        "mermaid": mermaid_graph(pipeline),
        "sql_diff": sql_diff(pipeline.sql_changes),
        "options": options_block(shown),
        "preview": preview_lines(pipeline.preview) if pipeline.preview else [],
        "preview_serial": pipeline.preview.base_serial if pipeline.preview else None,
        "samples": sample_tables(pipeline.preview) if pipeline.preview else [],
        "tests": pipeline.tests,
    }


def _symbol(action: Action) -> str:
    return SYMBOLS[action.action][0].strip() or "·"


def options_block(actions: list[Action]) -> str:
    """The options of new and changed connectors, for a fenced block: their values come from
    pipeline.yaml, and inside a fence no value renders as a link, HTML or a table cell
    (the plan makes each one printable line, so none can close the fence)."""
    return "\n".join(f"{_symbol(action)} {action.kind.replace('_', ' ')} {action.name}: {line}"
                     for action in actions for line in option_lines(action))


def sql_diff(changes: Sequence[Mapping[str, str]]) -> str:
    """One unified diff over every added, modified or removed relation's SQL."""
    lines: list[str] = []
    for change in changes:
        label = f"{change['kind']} {change['name']}"
        lines.extend(difflib.unified_diff(
            change["old"].splitlines(), change["new"].splitlines(),
            fromfile=f"a/{label}", tofile=f"b/{label}", lineterm=""))
    return "\n".join(lines).replace("```", "'''")


def mermaid_graph(pipeline: PlannedPipeline) -> str:
    """The changed relations and their direct neighbours, styled by change."""
    change = pipeline.diff.relation_changes()
    if not change:
        return ""
    graph = pipeline.graph
    nodes = set(change)
    edges = set()
    for reader, reads in graph.items():
        for read in reads:
            if read in change or reader in change:
                nodes.update((read, reader))
                edges.add((read, reader))
    tables = {action.name for action in pipeline.actions if action.kind == "table"}
    lines = ["graph LR"]
    for name in sorted(nodes):
        shape = f'[("{name}")]' if name in tables else f'["{name}"]'
        lines.append(f"  {_node_id(name)}{shape}:::{change.get(name, 'unchanged')}")
    lines.extend(f"  {_node_id(a)} --> {_node_id(b)}" for a, b in sorted(edges))
    lines.extend(f"  classDef {kind} {style}" for kind, style in NODE_STYLES.items())
    return "\n".join(lines)


def _node_id(name: str) -> str:
    return "n_" + re.sub(r"\W", "_", name)
