"""Where a pipeline's state lives under the project's storage root.

`<storage>/<pipeline>/tables/<name>` and `<storage>/<pipeline>/views/<name>` are
Delta tables, and `state/<view>` the per-group state of a maintained aggregate
view; `connectors/<name>/<generation>` is an input connector's streaming
checkpoint (a reset starts a new generation, a fresh id, so the old one stays valid
for the committed manifest until the new manifest is written).

Every part of a path built here is checked to be a plain name (no `/`, `..` or
control characters), so a path the layout gives always stays under the storage
root. Manifests store these paths relative to the storage root
(`<pipeline>/views/<name>`, see `Layout.relative`), and each is held against the
layout's (`Manifest.resolved`) before anything is read, restored or deleted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from reconciler.support.errors import ReconcileError

_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]*")


@dataclass(frozen=True)
class Layout:
    root: str
    pipeline: str

    def _join(self, *parts: str) -> str:
        for part in (self.pipeline, *parts):
            if not _PART.fullmatch(str(part)):
                raise ReconcileError(f"refusing a storage path with the part {str(part)!r}: "
                                     "paths under the storage root are built from plain names")
        return "/".join([self.root.rstrip("/"), self.pipeline, *parts])

    def relative(self, path: str) -> str:
        """A path this layout gave, relative to the storage root (`<pipeline>/views/<name>`):
        the form manifests store, so they stay valid when the root moves."""
        return path[len(self.root.rstrip("/")) + 1:]

    def folder(self, part: str) -> str:
        """`<storage>/<pipeline>/<part>`: `tables`, `views`, `state`, `connectors`,
        `quarantine`."""
        return self._join(part)

    def relation(self, kind: str, name: str) -> str:
        return self._join("tables" if kind == "table" else "views", name)

    def state(self, view: str) -> str:
        """The per-group state kept beside an incrementally maintained aggregate view."""
        return self._join("state", view)

    def checkpoint(self, connector: str, generation: str) -> str:
        return self._join("connectors", connector, str(generation))

    def quarantine(self, connector: str) -> str:
        return self._join("quarantine", connector)

    def approval(self) -> str:
        """The record of the program the last approved command committed
        (`engine.approval`): in storage, where a writer of the state prefix alone cannot
        forge it."""
        return self._join("approval")
