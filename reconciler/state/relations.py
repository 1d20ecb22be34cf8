"""The manifest's record of each table and view: typed, parsed once where it is read.

A manifest is JSON (`manifest.Manifest.from_document`); its `relations` become
`RelationRecord`s there, and everything after (plan, operations, the engine)
reads fields, not dictionary keys; `to_json` is the way back at the boundary.
Records are frozen: a write makes a new one (`replace`, `at`), so the state a
step started from stays as it was beside the state it makes.

The schema is kept as Spark's JSON form of a `StructType`. This layer (read by
`plan`, which must not load PySpark) cannot hold a Spark type; the engine turns
it into one in one place, `engine.runtime.PipelineRuntime.schema_of`, which decodes
each distinct schema once.

A manifest may come from a pull request's checkout: a record whose fields have
the wrong types is refused with its relation's name, before anything reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal, Self

from reconciler.support.errors import ReconcileError

Kind = Literal["table", "view"]


@dataclass(frozen=True)
class StoredTable:
    """A Delta table as a manifest pins it: where it is, which version, its columns."""

    path: str
    version: int
    schema: str  # Spark's JSON form of the table's StructType

    def at(self, version: int) -> Self:
        """The same table pinned at another version."""
        return replace(self, version=version)

    def to_json(self) -> dict[str, Any]:
        return {"path": self.path, "version": self.version, "schema": self.schema}

    @staticmethod
    def fields_of(entry: Any, what: str, where: str) -> dict[str, Any]:
        """The path, version and schema of a stored entry, type-checked."""
        if not isinstance(entry, dict):
            raise ReconcileError(f"manifest: {what} is not an object", file=where)
        path, version, schema = entry.get("path"), entry.get("version"), entry.get("schema")
        if not isinstance(path, str) or not isinstance(version, int) \
                or isinstance(version, bool) or not isinstance(schema, str):
            raise ReconcileError(f"manifest: {what} needs a path (text), a version (a "
                                 "number) and a schema (text)", file=where)
        return {"path": path, "version": version, "schema": schema}

    @classmethod
    def from_json(cls, entry: Any, what: str, where: str) -> StoredTable:
        return cls(**cls.fields_of(entry, what, where))


@dataclass(frozen=True)
class RelationRecord(StoredTable):
    """A table or a view of a pipeline: its Delta table and what the engine keeps beside it."""

    kind: Kind
    rows: int | None = None  # at `version` (from the Delta log)
    state: StoredTable | None = None  # a maintained aggregate view's per-group state
    insert_txn: int | None = None  # a table: the last `execute` app transaction it holds
    expectations: dict[str, Any] | None = None  # running totals (`engine.expectations`)
    timings: dict[str, Any] | None = None  # refresh: auto's measurements (`refresh_choice`)

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {"kind": self.kind, **super().to_json(), "rows": self.rows}
        if self.state is not None:
            document["state"] = self.state.to_json()
        if self.insert_txn is not None:
            document["insert_txn"] = self.insert_txn
        if self.expectations is not None:
            document["expectations"] = self.expectations
        if self.timings is not None:
            document["timings"] = self.timings
        return document

    @classmethod
    def from_json(cls, entry: Any, what: str, where: str) -> RelationRecord:
        stored = StoredTable.fields_of(entry, what, where)
        kind, rows = entry.get("kind"), entry.get("rows")
        if kind not in ("table", "view"):
            raise ReconcileError(f"manifest has {what} of unknown kind {kind!r}", file=where)
        state = entry.get("state")
        insert_txn, expectations = entry.get("insert_txn"), entry.get("expectations")
        timings = entry.get("timings")
        bad = [field for field, value, wanted in (("rows", rows, int),
                                                  ("insert_txn", insert_txn, int),
                                                  ("expectations", expectations, dict),
                                                  ("timings", timings, dict))
               if value is not None and not isinstance(value, wanted)]
        if bad:
            raise ReconcileError(f"manifest: {what} has a bad {bad[0]}", file=where)
        return cls(**stored, kind=kind, rows=rows,
                   state=None if state is None else StoredTable.from_json(
                       state, f"the state of {what}", where),
                   insert_txn=insert_txn, expectations=expectations, timings=timings)


def relations_from_json(entries: Any, where: str) -> dict[str, RelationRecord]:
    """A manifest's `relations` object as records."""
    if entries is None:
        return {}
    if not isinstance(entries, dict):
        raise ReconcileError("manifest: relations is not an object", file=where)
    return {name: RelationRecord.from_json(entry, f"relation '{name}'", where)
            for name, entry in entries.items()}
