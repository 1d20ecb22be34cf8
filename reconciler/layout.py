"""Where a pipeline's state lives under the project's storage root.

`<storage>/<pipeline>/tables/<name>` and `<storage>/<pipeline>/views/<name>` are
Delta tables; `connectors/<name>/<generation>` is an input connector's streaming
checkpoint (a reset starts a new generation, so the old one stays valid for the
committed manifest until the new manifest is written).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    root: str
    pipeline: str

    def _join(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), self.pipeline, *parts])

    def relation(self, kind: str, name: str) -> str:
        return self._join("tables" if kind == "table" else "views", name)

    def checkpoint(self, connector: str, generation: int) -> str:
        return self._join("connectors", connector, str(generation))

    def quarantine(self, connector: str) -> str:
        return self._join("quarantine", connector)
