"""Read committed pipeline state from the configured backend as typed manifests."""

from __future__ import annotations

from reconciler.manifest import Manifest
from reconciler.spec.project import Project
from state_backends import StateBackend, backend_from_url


def open_backend(project: Project, override: str | None = None) -> StateBackend:
    """The backend named by `--backend`, else by `reconcile.yaml`, else the default folder."""
    return backend_from_url(override or project.settings.backend, project.root)


def read_manifest(backend: StateBackend, pipeline: str) -> tuple[Manifest | None, str | None]:
    """The committed manifest and its version tag (ETag), or (None, None) for a new pipeline."""
    stored = backend.read_manifest(pipeline)
    if stored is None:
        return None, None
    where = f"{backend.url}/{pipeline}/manifest.json"
    return Manifest.from_document(stored.document, where), stored.version
