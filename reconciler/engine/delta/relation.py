"""A Delta table pinned at one version, as delta-rs's `DeltaTable` is: one object for what
the engine reads and writes of a relation (or of a view's maintenance state).

Its schema is decoded once, where the record is opened (`PipelineRuntime.relation`), and
every write returns the relation pinned at the version it made, which the runtime records
(`PipelineRuntime.pin`). The writes themselves stay where they were tuned: `merge` for a
change, `DeltaStorage` for a table's contents replaced.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from pyspark.sql import DataFrame
from pyspark.sql.types import StructType

from reconciler.engine.delta.merge import apply_changes
from reconciler.engine.delta.storage import DeltaStorage


@dataclass(frozen=True)
class DeltaRelation:
    """The table at `path`, at `version`, with `schema`, written through `storage` (a view
    state's may be the engine's own commits, `PipelineRuntime.state_storage`)."""

    storage: DeltaStorage
    path: str
    version: int
    schema: StructType

    def frame(self) -> DataFrame:
        """Its rows at the pinned version."""
        return self.storage.read(self.path, self.version, self.schema)

    def rows(self) -> int:
        """How many rows the pinned version holds (from the log's statistics when it can)."""
        return self.storage.row_count(self.path, self.version)

    def latest(self) -> DeltaRelation:
        """The relation at its table's newest version, which a write no manifest has
        committed yet may have made (ingestion, `execute`); itself when there is none newer.
        That version is opened once, for its number and what `PipelineRuntime.pin` reads."""
        latest = self.storage.kept_latest(self.path)
        return self if latest is None else replace(self, version=latest.version)

    def apply_changes(self, inserts: DataFrame | None, deletes: DataFrame | None, *,
                      unique_by: Sequence[str] = (), distinct: bool = False,
                      steady_source: bool = False) -> DeltaRelation:
        """The pinned version minus `deletes` plus `inserts` as the next one (`merge`)."""
        version = apply_changes(self, inserts, deletes, unique_by=unique_by,
                                distinct=distinct, steady_source=steady_source)
        return replace(self, version=version)

    def overwrite(self, contents: DataFrame) -> DeltaRelation:
        """Every row replaced by `contents`, the schema kept."""
        return replace(self, version=self.storage.overwrite(self.path, contents, self.schema))

    def replace_small(self, contents: DataFrame) -> DeltaRelation:
        """Every row of a small table replaced by `contents` (`DeltaStorage.replace_small`:
        the engine's own commit where the log allows)."""
        version = self.storage.replace_small(self.storage.at(self.path), contents, self.schema)
        return replace(self, version=version)
