"""One step of a running pipeline: ingest, refresh, emit; the caller commits.

A step ingests every input connector to the end of its available input, then
recomputes the views whose inputs changed (in dependency order), and sends each
refreshed view's changes (`_op` = insert/delete) to its output connectors. When
no table has a Delta version newer than the manifest's, nothing runs on Spark
and nothing is committed.

Table versions newer than the manifest's can also come from a step or an
`execute` that crashed before its commit: they hold rows that were ingested
exactly once (app transactions), so the next step adopts them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.connectors import changes_between, emit, ingest
from reconciler.faults import crash_point
from reconciler.runtime import PipelineRuntime


@dataclass
class StepResult:
    ingested: dict[str, int] = field(default_factory=dict)
    changed_tables: list[str] = field(default_factory=list)
    refreshed: list[str] = field(default_factory=list)
    emitted: dict[str, int] = field(default_factory=dict)

    @property
    def has_changes(self) -> bool:
        return bool(self.changed_tables)


def run_step(runtime: PipelineRuntime, connectors: dict[str, dict[str, Any]], *, serial: int,
             base_dir: Path, ingest_inputs: bool = True) -> StepResult:
    """Advance the pipeline by one step; `runtime.relations` is updated in place."""
    program = runtime.program
    result = StepResult()
    if ingest_inputs:
        for name, definition in program["connectors"].items():
            if definition["direction"] == "input":
                ingested = ingest(runtime, name, definition, connectors[name], base_dir)
                if ingested is not None:
                    result.ingested[name] = ingested.batches
        crash_point("step-after-ingest")
    table_before = {}
    for table in program["tables"]:
        state = runtime.relations[table]
        latest = runtime.storage.latest_version(state["path"])
        if latest is not None and latest != state["version"]:
            table_before[table] = runtime.frame(table)
            runtime.adopt_table_version(table, latest)
            result.changed_tables.append(table)
    if not result.changed_tables:
        return result
    changed = set(result.changed_tables)
    outputs: dict[str, list[str]] = {}
    for name, definition in program["connectors"].items():
        if definition["direction"] == "output":
            outputs.setdefault(definition["relation"], []).append(name)
    for table in result.changed_tables:
        for connector in outputs.get(table, []):
            changes = changes_between(table_before[table], runtime.frame(table))
            result.emitted[connector] = emit(runtime, connector, program["connectors"][connector],
                                             changes, serial, base_dir, snapshot=False)
    for view in program["order"]:
        definition = program["views"].get(view)
        if definition is None or not changed.intersection(definition["reads"]):
            continue
        before = runtime.frame(view)
        runtime.write_view(view, runtime.evaluate(view))
        changed.add(view)
        result.refreshed.append(view)
        for connector in outputs.get(view, []):
            changes = changes_between(before, runtime.frame(view))
            result.emitted[connector] = emit(runtime, connector, program["connectors"][connector],
                                             changes, serial, base_dir, snapshot=False)
    return result
