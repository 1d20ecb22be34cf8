"""Where a pipeline's state lives under the project's storage root.

`<storage>/<pipeline>/tables/<name>` and `<storage>/<pipeline>/views/<name>` are
Delta tables; `connectors/<name>/<generation>` is an input connector's streaming
checkpoint (a reset starts a new generation, a fresh id, so the old one stays valid
for the committed manifest until the new manifest is written).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def resolve_path(path: str, base_dir: Path) -> str:
    """Connector paths are relative to the project folder unless absolute or a URI."""
    if "://" in path or os.path.isabs(path):
        return path
    return str((base_dir / path).resolve())


@dataclass(frozen=True)
class Layout:
    root: str
    pipeline: str

    def _join(self, *parts: str) -> str:
        return "/".join([self.root.rstrip("/"), self.pipeline, *parts])

    def relation(self, kind: str, name: str) -> str:
        return self._join("tables" if kind == "table" else "views", name)

    def checkpoint(self, connector: str, generation: str) -> str:
        return self._join("connectors", connector, str(generation))

    def quarantine(self, connector: str) -> str:
        return self._join("quarantine", connector)
