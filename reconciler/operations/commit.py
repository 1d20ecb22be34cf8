"""The commit of an operation and what follows it: the manifest written with compare-and-swap,
tables an interrupted bootstrap emptied restored first, then the Delta folders no manifest
points to deleted and retention run.

Every apply and step ends here (`destroy` writes its marks itself), so
what a commit records (where Spark ran, which writer wrote, the analysis memo) is decided
in one place.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

from reconciler.desired.model.program import Program
from reconciler.desired.settings.project import Project
from reconciler.operations.engine import Engine
from reconciler.state.environments import environments_of
from reconciler.state.manifest import Manifest
from reconciler.state.reader import pipeline_layout
from reconciler.support.errors import public_message
from state_backends import StateBackend


def commit_manifest(project: Project, backend: StateBackend, manifest: Manifest,
                    etag: str | None, engine: Engine | None = None, *,
                    approves: bool = False) -> str:
    """Write the manifest, its paths relative to the storage root; with `engine`, it
    records where Spark ran and which Delta writer wrote (`status` shows both). A command
    that `approves` the manifest's program records it in storage first
    (`engine.approval`), so that steps run it and no program a state-bucket writer put
    there instead."""
    if approves:
        from reconciler.engine.approval import record_approval  # pyarrow: only when writing

        record_approval(pipeline_layout(project, manifest.pipeline), manifest.lineage,
                        manifest.serial, manifest.program)
    if engine is not None:
        ran = {"spark_target": engine.target}
        if "storage" in engine.__dict__:  # the storage this command opened (never opens one)
            ran["delta_writer"] = engine.storage.writer.name
        manifest = replace(manifest, engine={**manifest.engine, **ran})
    document = manifest.stored_document(pipeline_layout(project, manifest.pipeline))
    return backend.write_manifest(manifest.pipeline, document, etag)


def first_manifest(program: Program, **fields: Any) -> Manifest:
    """The manifest a first deployment commits: the program, the analysis memo, `fields`."""
    return Manifest.first(program.pipeline, program.document(), analysis=analysis_memo(program),
                          **fields)


def analysis_memo(program: Program) -> dict[str, Any] | None:
    """The analysis memo a committed manifest keeps for later plans (`desired.analysis.memo`): what
    analysing `program` found here, every view analysed from its SQL (apply reads none)."""
    return program.analysis.document() if program.analysis is not None else None


def undo_uncommitted_writes(engine: Engine, manifest: Manifest) -> Manifest:
    """Restore tables that an interrupted bootstrap emptied in place to their committed version.

    While a pipeline is not Running nothing but a bootstrap writes to its tables, so
    any newer version comes from a bootstrap that never committed; left alone, the
    next step would adopt it as ingested data. Returns the manifest with the new
    (identical in content) versions, which the caller commits with its next manifest.
    """
    from reconciler.engine.delta.log import probe_latest_version

    stale = [name for name, record in manifest.relations.items() if record.kind == "table"
             and probe_latest_version(record.path) not in (None, record.version)]
    if not stale:  # the usual case: decided from the Delta logs, without starting Spark
        return manifest
    relations = dict(manifest.relations)
    for name in stale:
        record = relations[name]
        relations[name] = record.at(engine.storage.restore(record.path, record.version))
    return replace(manifest, relations=relations)


def discard_unused(engine: Engine, before: Manifest, after: Manifest) -> None:
    """After the commit, delete the Delta folders no manifest points to any more."""
    live = {record.path for record in after.relations.values()}
    for record in before.relations.values():
        if record.path not in live:
            engine.storage.delete(record.path)


def collect_garbage(project: Project, backend: StateBackend, name: str, *,
                    dry_run: bool = False, strict: bool = False) -> Any:
    """Retention after a commit (see `engine/delta/retention.py`); no Spark is started.

    The retained manifests are the newest `retention.serials` of the backend's history,
    and each serial a pull-request environment reads (`state.environments`: it pins its
    base serial's versions while it exists), each checked against the layout and its paths
    made absolute first. After a commit a
    failure here only skips the pass (the commit stands; the next one tries again);
    `strict` (for `state gc`) raises.
    """
    from reconciler.engine.delta.retention import collect_garbage as collect

    layout = pipeline_layout(project, name)
    retention = project.settings.retention
    try:
        serials = sorted(backend.list_history(name), reverse=True)[:retention.serials]
        pins = environments_of(backend.read_environments(name),
                               f"{backend.url}/{name}/environments.json")
        serials += sorted({pin.base_serial for pin in pins.values()} - set(serials))
        where = f"{backend.url}/{name}/history"
        documents = [Manifest.from_document(backend.read_history(name, serial), where)
                     .resolved(layout, where).to_document() for serial in serials]
        if not documents:
            return None
        return collect(layout, documents, min_age_seconds=retention.min_age_seconds,
                       dry_run=dry_run)
    except Exception as error:
        if strict:
            raise
        logging.getLogger("reconciler").warning(
            "retention skipped for %s (%s); `reconcile state gc -p %s` retries it",
            name, public_message(error), name)
        return None
