"""The checkpoint manifest: the last committed version of a pipeline.

It is the only commit point. Everything an apply or a step produces (Delta
versions, connector checkpoints) becomes visible only when a new manifest with
serial + 1 is written with compare-and-swap on the previous one's version tag.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Literal

from reconciler import __version__
from reconciler.errors import ReconcileError
from reconciler.layout import Layout

MANIFEST_FORMAT = 1
Status = Literal["Running", "AwaitingApproval", "Bootstrapping", "Failed"]
STATUSES: tuple[str, ...] = ("Running", "AwaitingApproval", "Bootstrapping", "Failed")


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
    connectors: dict[str, dict[str, Any]] = field(default_factory=dict)
    relations: dict[str, dict[str, Any]] = field(default_factory=dict)
    last_step: dict[str, Any] | None = None
    # The approved or awaiting change: {"desired_fingerprint": ...}; None when Running.
    pending: dict[str, Any] | None = None
    # Hashes of the reconcile.yaml settings it was applied with (see specs.settings_summary).
    settings: dict[str, str] | None = None

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
                connectors=dict(document.get("connectors") or {}),
                relations=dict(document.get("relations") or {}),
                last_step=document.get("last_step"),
                pending=document.get("pending"),
                settings=document.get("settings"),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise ReconcileError(f"manifest is missing or has a bad field: {error}",
                                 file=where) from None
        if manifest.status not in STATUSES:
            raise ReconcileError(f"manifest has unknown status {manifest.status!r}", file=where)
        return manifest

    def check_layout(self, layout: Layout, where: str) -> None:
        """Refuse a manifest that points outside the pipeline's own folders.

        A manifest can come from anywhere a backend can be written (a folder in a
        pull request's checkout, say), and its paths are later read, restored and,
        for dropped objects, deleted. Each must be exactly where the layout puts
        that kind and name, under the configured storage root.
        """
        if self.pipeline != layout.pipeline:
            raise ReconcileError(f"manifest is for pipeline '{self.pipeline}', not "
                                 f"'{layout.pipeline}'", file=where)
        expected: list[tuple[str, Any, str]] = []
        for name, state in self.relations.items():
            kind = state.get("kind") if isinstance(state, dict) else None
            if kind not in ("table", "view"):
                raise ReconcileError(f"manifest has relation '{name}' of unknown kind {kind!r}",
                                     file=where)
            expected.append((f"{kind} '{name}'", state.get("path"),
                             layout.relation(kind, name)))
            if kind == "view" and isinstance(state.get("state"), dict):
                expected.append((f"state of view '{name}'", state["state"].get("path"),
                                 layout.state(name)))
        for name, state in self.connectors.items():
            if isinstance(state, dict) and "checkpoint" in state:
                expected.append((f"connector '{name}'", state["checkpoint"],
                                 layout.checkpoint(name, str(state.get("generation")))))
        for what, found, wanted in expected:
            if found != wanted:
                raise ReconcileError(f"manifest puts {what} at {found!r}, not at {wanted!r} "
                                     "where the storage layout does: refusing to read, restore "
                                     "or delete it (was `storage` moved?)", file=where)

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
            "connectors": self.connectors,
            "relations": self.relations,
            "last_step": self.last_step,
            "pending": self.pending,
            "settings": self.settings,
        }

    def next(self, **changes: Any) -> Manifest:
        """The successor manifest: serial + 1, fresh timestamp and engine versions."""
        kept = {key: self.engine[key] for key in ("spark_target",) if key in self.engine}
        return replace(self, serial=self.serial + 1, updated_at=utc_now(),
                       engine=engine_versions() | kept, **changes)

    @classmethod
    def first(cls, pipeline: str, program: dict[str, Any], **fields: Any) -> Manifest:
        """The first manifest of a new pipeline: a new lineage, serial 1."""
        return cls(pipeline=pipeline, lineage=str(uuid.uuid4()), serial=1, status="Running",
                   program=program, **fields)
