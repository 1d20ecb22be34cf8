"""The checkpoint manifest: the last committed version of a pipeline.

It is the only commit point. Everything an apply or a step produces (Delta
versions, connector checkpoints) becomes visible only when a new manifest with
serial + 1 is written with compare-and-swap on the previous one's version tag.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from enum import StrEnum
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from reconciler import __version__
from reconciler.state.connectors import ConnectorState, connectors_from_json
from reconciler.state.layout import Layout
from reconciler.state.relations import RelationRecord, relations_from_json
from reconciler.support.errors import ReconcileError

MANIFEST_FORMAT = 1


class Status(StrEnum):
    """A pipeline's status, as its manifest records it: a `StrEnum`, so the manifest's JSON
    holds the same string and a status read back from JSON compares equal to its member."""

    RUNNING = "Running"
    AWAITING_APPROVAL = "AwaitingApproval"
    BOOTSTRAPPING = "Bootstrapping"
    FAILED = "Failed"


STATUSES: tuple[str, ...] = tuple(Status)


def spark_version() -> str:
    """The installed PySpark version, read from package metadata (no JVM, no import)."""
    try:
        return version("pyspark")
    except PackageNotFoundError:
        return "unknown"


def engine_versions() -> dict[str, str]:
    return {"reconciler": __version__, "spark": spark_version()}


def utc_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class PendingChange:
    """The change a manifest awaits approval for or is bootstrapping: the desired program's
    fingerprint, the `--select` selection approved with it (its document), or a
    `--full-refresh`. An apply that finds its own change here resumes it; `approve` applies
    exactly this one."""

    desired_fingerprint: str
    selection: dict[str, Any] | None = None
    full_refresh: bool = False

    @classmethod
    def from_json(cls, document: Any) -> PendingChange | None:
        """A stored `pending`; TypeError (a bad field, `Manifest.from_document` says which
        file) when it is not the mapping this version writes."""
        if document is None:
            return None
        if not isinstance(document, dict):
            raise TypeError("pending is not a mapping")
        fingerprint = document.get("desired_fingerprint")
        selection, full = document.get("selection"), document.get("full_refresh", False)
        if not isinstance(fingerprint, str) or not isinstance(selection, dict | None) \
                or not isinstance(full, bool):
            raise TypeError("pending is not {desired_fingerprint, selection, full_refresh}")
        return cls(fingerprint, selection, full)

    def to_json(self) -> dict[str, Any]:
        """As stored: `selection` and `full_refresh` only when set."""
        return {"desired_fingerprint": self.desired_fingerprint,
                **({"selection": self.selection} if self.selection is not None else {}),
                **({"full_refresh": True} if self.full_refresh else {})}


@dataclass(frozen=True)
class Manifest:
    """One committed version of a pipeline, as stored by a state backend."""

    pipeline: str
    lineage: str
    serial: int
    status: Status
    program: dict[str, Any]
    status_details: Any = None
    engine: dict[str, str] = field(default_factory=engine_versions)
    git_sha: str | None = None
    updated_at: str = field(default_factory=utc_now)
    connectors: dict[str, ConnectorState] = field(default_factory=dict)
    relations: dict[str, RelationRecord] = field(default_factory=dict)
    last_step: dict[str, Any] | None = None
    # The approved or awaiting change; None when Running.
    pending: PendingChange | None = None
    # Hashes of the reconcile.yaml settings it was applied with (see specs.settings_summary).
    settings: dict[str, str] | None = None
    # What analysing `program` found, under keys of everything each result depends on
    # (`desired.analysis.memo`): a later plan reuses it for the views that did not change.
    analysis: dict[str, Any] | None = None
    # The catalog database its relations are published to (`publish:`) as of this commit;
    # None: not published, or by a version that did not record it. A later commit that
    # publishes elsewhere, or not at all, drops the views there (`operations.publication`).
    published: str | None = None

    @classmethod
    def from_document(cls, document: dict[str, Any], where: str) -> Manifest:
        """Read a stored manifest; refuse formats this version cannot understand."""
        found = document.get("format_version")
        if not isinstance(found, int) or found > MANIFEST_FORMAT:
            raise ReconcileError(f"manifest format {found!r} is not supported by reconciler "
                                 f"{__version__} (supports {MANIFEST_FORMAT}); upgrade the "
                                 "reconciler", file=where)
        try:
            manifest = cls(
                pipeline=document["pipeline"], lineage=document["lineage"],
                serial=int(document["serial"]), status=document["status"],
                program=document["program"], status_details=document.get("status_details"),
                engine=dict(document.get("engine") or {}), git_sha=document.get("git_sha"),
                updated_at=document.get("updated_at", ""),
                connectors=connectors_from_json(document.get("connectors"), where),
                relations=relations_from_json(document.get("relations"), where),
                last_step=document.get("last_step"),
                pending=PendingChange.from_json(document.get("pending")),
                settings=document.get("settings"),
                analysis=analysis if isinstance(analysis := document.get("analysis"), dict)
                else None,
                published=published if isinstance(published := document.get("published"), str)
                else None,
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ReconcileError(f"manifest is missing or has a bad field: {error}",
                                 file=where) from None
        if manifest.status not in STATUSES:
            raise ReconcileError(f"manifest has unknown status {manifest.status!r}", file=where)
        return manifest

    def resolved(self, layout: Layout, where: str) -> Manifest:
        """This manifest with its stored paths made absolute under the layout's storage root.

        A manifest can come from anywhere a backend can be written (a folder in a pull
        request's checkout, say), and its paths are later read, restored and, for dropped
        objects, deleted: each must be where the layout puts that kind and name (see
        `_resolve_path` for the forms accepted), so none can lead out of the pipeline's
        own folders.
        """
        if self.pipeline != layout.pipeline:
            raise ReconcileError(f"manifest is for pipeline '{self.pipeline}', not "
                                 f"'{layout.pipeline}'", file=where)
        relations, connectors = _map_paths(self, layout, where, lambda what, found, wanted:
                                           _resolve_path(what, found, wanted, layout, where))
        return replace(self, relations=relations, connectors=connectors)

    def stored_document(self, layout: Layout) -> dict[str, Any]:
        """The document a backend stores: paths relative to the storage root, so the
        manifest stays valid when the project (or the bucket prefix) moves."""
        relations, connectors = _map_paths(self, layout, "manifest", lambda what, found, wanted:
                                           _relative_path(what, found, wanted, layout))
        return replace(self, relations=relations, connectors=connectors).to_document()

    def to_document(self) -> dict[str, Any]:
        return {
            "format_version": MANIFEST_FORMAT,
            "pipeline": self.pipeline,
            "lineage": self.lineage,
            "serial": self.serial,
            "status": self.status,
            "status_details": self.status_details,
            "engine": self.engine,
            "git_sha": self.git_sha,
            "updated_at": self.updated_at,
            "program": self.program,
            "connectors": {name: state.to_json() for name, state in self.connectors.items()},
            "relations": {name: record.to_json() for name, record in self.relations.items()},
            "last_step": self.last_step,
            "pending": self.pending.to_json() if self.pending is not None else None,
            "settings": self.settings,
            # Written only when there is one: documents without it stay as they were.
            **({"analysis": self.analysis} if self.analysis is not None else {}),
            **({"published": self.published} if self.published is not None else {}),
        }

    def next(self, **changes: Any) -> Manifest:
        """The successor manifest: serial + 1, fresh timestamp and engine versions."""
        kept = {key: self.engine[key] for key in ("spark_target", "delta_writer")
                if key in self.engine}
        return replace(self, serial=self.serial + 1, updated_at=utc_now(),
                       engine=engine_versions() | kept, **changes)

    @classmethod
    def first(cls, pipeline: str, program: dict[str, Any], **fields: Any) -> Manifest:
        """The first manifest of a new pipeline: a new lineage, serial 1."""
        return cls(pipeline=pipeline, lineage=str(uuid.uuid4()), serial=1, status=Status.RUNNING,
                   program=program, **fields)


PathRule = Callable[[str, Any, str], str]
"""(what, path found in the manifest, the layout's absolute path for it) -> path to keep."""


def _map_paths(manifest: Manifest, layout: Layout, where: str, rule: PathRule
               ) -> tuple[dict[str, RelationRecord], dict[str, ConnectorState]]:
    """The relations and connectors with every storage path passed through `rule`: Delta
    folders of tables and views, state tables of maintained views, connector checkpoints."""
    relations: dict[str, RelationRecord] = {}
    for name, record in manifest.relations.items():
        kind = record.kind
        record = replace(record, path=rule(f"{kind} '{name}'", record.path,
                                           layout.relation(kind, name)))
        if record.state is not None:
            record = replace(record, state=replace(record.state, path=rule(
                f"state of {kind} '{name}'", record.state.path, layout.state(name))))
        relations[name] = record
    connectors: dict[str, ConnectorState] = {}
    for name, state in manifest.connectors.items():
        if state.checkpoint is not None:
            state = state.model_copy(update={"checkpoint": rule(
                f"connector '{name}'", state.checkpoint,
                layout.checkpoint(name, str(state.generation)))})
        connectors[name] = state
    return relations, connectors


def _resolve_path(what: str, found: Any, wanted: str, layout: Layout, where: str) -> str:
    """The absolute path of a stored one, which must be the layout's for that kind and name.

    Stored form: relative to the storage root (`<pipeline>/views/<name>`). Manifests
    written before that hold absolute paths: one equal to the layout's is taken as it is;
    one that ends in the layout's relative path, with the storage root's scheme and no
    `..`, is rebased onto the current root (the project folder or bucket prefix moved).
    Anything else is refused.
    """
    relative = layout.relative(wanted)
    if found in (relative, wanted) or _moved(found, relative, layout.root):
        return wanted
    raise ReconcileError(f"manifest puts {what} at {found!r}, not at {relative!r} under the "
                         f"storage root where the layout does: refusing to read, restore or "
                         "delete it", file=where)


def _moved(found: Any, relative: str, root: str) -> bool:
    """Whether `found` is an absolute path to `relative` under another root of the same kind."""
    if not isinstance(found, str) or not found.endswith(f"/{relative}"):
        return False
    old_root = found[:-len(relative) - 1]
    scheme = _URL_SCHEME.match(old_root)
    if (scheme[1] if scheme else "") != _scheme(root):
        return False
    folders = old_root[scheme.end():] if scheme else old_root
    return ((scheme is not None or folders.startswith("/")) and folders.isprintable()
            and ".." not in folders.split("/"))


_URL_SCHEME = re.compile(r"([a-z][a-z0-9+.-]*)://")


def _scheme(root: str) -> str:
    """The storage root's scheme (`s3a`), "" for a local folder (`resolve_path` drops `file`)."""
    match = _URL_SCHEME.match(root)
    return match[1] if match else ""


def _relative_path(what: str, found: Any, wanted: str, layout: Layout) -> str:
    """The stored form of an in-memory path, which is always the layout's own."""
    if found != wanted:
        raise ReconcileError(f"refusing to commit {what} at {found!r}: the layout puts it at "
                             f"{wanted!r}")
    return layout.relative(wanted)
