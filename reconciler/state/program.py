"""The program a runtime runs, typed once: its tables, views and order as frozen records.

A manifest keeps its program as JSON (`Program.document`), and a plan's diff composes
one (`ProgramDiff.new`) from the committed and the desired documents. The engine and
the operations read it many times a step (a table's columns and key, a view's SQL,
what it reads, its refresh mode, its expectations), so it is read into records here,
once per runtime (`CommittedProgram.of`), instead of each reader looking keys up in
the document. The document stays beside the records for what speaks JSON: the diff,
the manifest an apply writes, and the connectors (typed with their paths resolved by
`state.connectors.connector_definitions`).

A record is frozen and hashable, so what the engine derives from one (a table's Spark
schema) is derived once per record, not once per reader.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from reconciler.desired.parsing.expectation_clauses import Expectation
from reconciler.desired.parsing.sql import ColumnDef

RefreshMode = Literal["incremental", "auto", "full"]


@dataclass(frozen=True)
class CommittedTable:
    """A table as the program defines it: its columns (with their DEFAULTs), its key."""

    name: str
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[str, ...]
    materialized: bool
    expectations: tuple[Expectation, ...] = ()

    def default(self, column: str) -> str | None:
        """A column's DEFAULT literal (Spark SQL text), or None."""
        return next(c.default for c in self.columns if c.name == column)

    @property
    def defaults(self) -> dict[str, str]:
        """The columns that have a DEFAULT, with it."""
        return {c.name: c.default for c in self.columns if c.default}


@dataclass(frozen=True)
class CommittedView:
    """A view as the program defines it: its statement, what it reads, how it is kept."""

    name: str
    sql: str  # the whole CREATE statement, expectation clauses included
    query: str  # its query alone, as the program keeps it (`desired.parsing.sql`)
    reads: tuple[str, ...]
    refresh: RefreshMode | None
    materialized: bool
    expectations: tuple[Expectation, ...] = ()
    part_of: str | None = None  # the view whose subquery this is (`desired.analysis.view_parts`)

    @property
    def maintained(self) -> bool:
        """Whether a step may maintain it incrementally (`auto` decides at each step)."""
        return self.refresh in ("incremental", "auto")


@dataclass(frozen=True)
class CommittedProgram:
    """A program's tables and views in dependency order, and the document they come from."""

    tables: Mapping[str, CommittedTable]
    views: Mapping[str, CommittedView]
    order: tuple[str, ...]
    document: Mapping[str, Any] = field(compare=False, repr=False)

    def relation(self, name: str) -> CommittedTable | CommittedView:
        return self.tables[name] if name in self.tables else self.views[name]

    @staticmethod
    def of(document: Mapping[str, Any]) -> CommittedProgram:
        """The records of a program document (the JSON boundary: read here, nowhere else)."""
        return CommittedProgram(
            tables={name: _table(name, entry)
                    for name, entry in document.get("tables", {}).items()},
            views={name: _view(name, entry) for name, entry in document.get("views", {}).items()},
            order=tuple(document.get("order") or ()), document=document)


def _expectations(entry: Mapping[str, Any]) -> tuple[Expectation, ...]:
    return tuple(Expectation(e["name"], e["condition"], e["action"], 0)
                 for e in entry.get("expectations") or ())


def _table(name: str, entry: Mapping[str, Any]) -> CommittedTable:
    return CommittedTable(
        name=name,
        columns=tuple(ColumnDef(c["name"], c["type"], c["nullable"], c.get("default"))
                      for c in entry["columns"]),
        primary_key=tuple(entry.get("primary_key") or ()),
        materialized=bool(entry.get("materialized")), expectations=_expectations(entry))


def _view(name: str, entry: Mapping[str, Any]) -> CommittedView:
    return CommittedView(name=name, sql=entry["sql"], query=entry["query"],
                         reads=tuple(entry.get("reads") or ()), refresh=entry.get("refresh"),
                         materialized=bool(entry.get("materialized")),
                         expectations=_expectations(entry), part_of=entry.get("part_of"))
