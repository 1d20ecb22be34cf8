"""A data preview as a plan carries it (`pipelines[].preview`), typed.

The engine computes it read-only from committed state (`engine.preview.counts`), the
plan carries it, and the renderings show it; the JSON shape (`document`, in
docs/concepts.md) exists only in the plan artifact written out and read back. Sample rows
stay JSON-shaped (column name to printed value): they are only ever shown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PREVIEW_FORMAT = 1

Samples = Mapping[str, Any]
"""Sample rows by kind: `added`, `removed` (lists of {column: printed value}) and, with a
key, `changed` (pairs of `before` and `after`)."""


@dataclass(frozen=True)
class ViewPreview:
    """What an apply would do to one view's rows, or (`unavailable`) why it was not
    previewed. `kind` is new, modified or downstream."""

    kind: str
    unavailable: str | None = None
    rows_before: int | None = None  # None: the view is new
    rows_after: int = 0
    added: int = 0
    removed: int = 0
    nulls: Mapping[str, int] | None = None  # a new view's NULLs per column
    columns_changed: bool = False  # other columns: every row removed and added
    key: tuple[str, ...] | None = None  # with a key: rows changed, and by which column
    changed: int = 0
    changed_values: Mapping[str, int] = field(default_factory=dict)
    samples: Samples | None = None

    def document(self) -> dict[str, Any]:
        if self.unavailable is not None:
            return {"kind": self.kind, "unavailable": self.unavailable}
        document: dict[str, Any] = {"kind": self.kind, "rows_before": self.rows_before,
                                    "rows_after": self.rows_after, "added": self.added,
                                    "removed": self.removed}
        if self.nulls is not None:
            document["nulls"] = dict(self.nulls)
        if self.columns_changed:
            document["columns_changed"] = True
        if self.key is not None:
            document |= {"key": list(self.key), "changed": self.changed,
                         "changed_values": dict(self.changed_values)}
        if self.samples is not None:
            document["samples"] = self.samples
        return document

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> ViewPreview:
        if "unavailable" in document:
            return cls(document["kind"], unavailable=document["unavailable"])
        key = document.get("key")
        return cls(document["kind"], rows_before=document["rows_before"],
                   rows_after=document["rows_after"], added=document["added"],
                   removed=document["removed"], nulls=document.get("nulls"),
                   columns_changed=bool(document.get("columns_changed")),
                   key=None if key is None else tuple(key), changed=document.get("changed", 0),
                   changed_values=document.get("changed_values") or {},
                   samples=document.get("samples"))


@dataclass(frozen=True)
class PipelinePreview:
    """One pipeline's preview: each computed view's, from the committed `base_serial`, or
    (`error`) why there is none; the plan stands either way."""

    views: Mapping[str, ViewPreview]
    base_serial: int | None = None
    error: str | None = None

    @classmethod
    def failed(cls, why: str) -> PipelinePreview:
        return cls({}, error=why)

    def document(self) -> dict[str, Any]:
        if self.error is not None:
            return {"format": PREVIEW_FORMAT, "error": self.error, "views": {}}
        return {"format": PREVIEW_FORMAT, "base_serial": self.base_serial,
                "views": {name: view.document() for name, view in self.views.items()}}

    @classmethod
    def from_document(cls, document: Mapping[str, Any] | None) -> PipelinePreview | None:
        """A saved plan's `preview` (None when the plan has none)."""
        if document is None:
            return None
        if document.get("error") is not None:
            return cls.failed(str(document["error"]))
        return cls({name: ViewPreview.from_document(view)
                    for name, view in document["views"].items()}, document.get("base_serial"))
