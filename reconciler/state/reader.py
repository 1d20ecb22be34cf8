"""Read committed pipeline state from the configured backend as typed manifests."""

from __future__ import annotations

import logging
from typing import Any

from reconciler.desired.model.committed import check_committed_program
from reconciler.desired.settings.project import Project
from reconciler.state.layout import Layout
from reconciler.state.manifest import Manifest
from reconciler.state.program import CommittedProgram
from reconciler.support.errors import ReconcileError, public_message
from state_backends import StateBackend, StateBackendError, backend_from_url


def open_backend(project: Project, override: str | None = None, *,
                 lock_timeout: float = 0.0) -> StateBackend:
    """The backend named by `--backend`, else by `reconcile.yaml`, else the default folder;
    its `locked` waits up to `lock_timeout` seconds for another run's lock, and its locks'
    leases last `lock_lease_seconds`."""
    backend = backend_from_url(override or project.settings.backend, project.root)
    backend.lock_timeout = lock_timeout
    backend.lock_lease = project.settings.lock_lease_seconds
    return backend


def pipeline_layout(project: Project, pipeline: str) -> Layout:
    """Where `pipeline`'s tables, views and checkpoints live under the storage root."""
    return Layout(project.resolve(project.settings.storage), pipeline)


def read_manifest(backend: StateBackend, pipeline: str,
                  layout: Layout | None = None) -> tuple[Manifest | None, str | None]:
    """The committed manifest and its version tag (ETag), or (None, None) for a new pipeline.

    With `layout`, every path in it is checked against the layout and made absolute
    under the storage root (`Manifest.resolved`): what plans, applies and steps read,
    restore or delete is always the pipeline's own. Without, paths stay as stored
    (relative to the storage root), for commands that only show the manifest.
    """
    stored = backend.read_manifest(pipeline)
    if stored is None:
        return None, None
    where = f"{backend.url}/{pipeline}/manifest.json"
    manifest = Manifest.from_document(stored.document, where)
    if layout is not None:
        manifest = manifest.resolved(layout, where)
    return manifest, stored.version


def committed_program(backend: StateBackend, manifest: Manifest) -> CommittedProgram:
    """The manifest's program, once checked as if a pull request wrote it
    (`desired.model.committed`), as records: whatever runs it (a step, `execute`, `query`) calls
    this first."""
    check_committed_program(manifest.pipeline, manifest.program,
                            f"{backend.url}/{manifest.pipeline}/manifest.json")
    return CommittedProgram.of(manifest.program)


def orphaned_pipelines(project: Project, backend: StateBackend) -> list[dict[str, Any]]:
    """Pipelines with state in the backend and no folder in the project (a folder deleted,
    or renamed): each with its committed serial and status and the command that removes
    it. Their state stays until then; nothing else ever reads it. A manifest that cannot
    be read is listed with why, and the same way out; a lock alone, with the command that
    releases it. A backend that cannot be listed (a
    role allowed to read objects only) lists none, with a warning: a plan does not need
    them."""
    try:
        names = backend.list_pipelines()
    except StateBackendError as error:  # a bucket policy without ListBucket, say
        logging.getLogger("reconciler").warning(
            "orphaned pipelines not listed: %s", public_message(error))
        return []
    found = []
    for name in names:
        if name in project.pipeline_dirs:
            continue
        entry: dict[str, Any] = {"name": name, "serial": None, "status": None,
                                 "updated_at": None, "hint": f"reconcile destroy -p {name}"}
        try:
            manifest, _ = read_manifest(backend, name)
        except (ReconcileError, StateBackendError) as error:
            entry["error"] = public_message(error)
            manifest = None
        if manifest is not None:
            entry.update(serial=manifest.serial, status=manifest.status,
                         updated_at=manifest.updated_at)
        elif "error" not in entry:  # a destroy (or a first apply) stopped before its end
            entry["error"] = "a lock and no manifest"
            lock = backend.read_lock(name)
            if lock is not None:
                entry["hint"] = f"reconcile state force-unlock {lock.id} -p {name}"
        found.append(entry)
    return found
