"""Fingerprints of a program's relations, precise to the column (see `desired.analysis.lineage`).

A fingerprint is a pure function of the program document's definitions (table
columns, view queries), so the planner can recompute the committed program's
with the same code it uses for the desired one: a reconciler upgrade that
fingerprints differently never shows up as a modification.

- A table column's fingerprint is its type and nullability; a table's own
  fingerprint is its whole definition (it decides whether the table changed).
- A view's fingerprint covers its query text, `MATERIALIZED`, and the
  fingerprints of exactly the columns it reads, plus the *rows* fingerprint of
  each relation it reads (a `COUNT(*)` over a view depends on that view's
  filter, not on a column).
- Each output column of a view has its own fingerprint: its expression and
  the view's context (what decides which rows exist) with the columns both
  read, so a reader of `v.a` is not modified when `v` gains column `b`. A view
  whose outputs cannot be separated (`DISTINCT`, set operations, subqueries)
  gives every output column the view's fingerprint.
- A relation's expectations (`desired.parsing.expectation_clauses`) are part of its
  fingerprint; only DROP ROW ones, which decide a view's rows, reach its columns' and
  rows' fingerprints (and so its readers): counting or failing on a row changes no reader's input.

A table's rows change without its columns only when it is truncated; the diff
propagates that along the graph (`plan.diff`), since whether a table can
evolve depends on the old definition as well as the new.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.desired.analysis.lineage import LineageOf, OutputLineage, view_lineage
from reconciler.desired.parsing.expectation_clauses import drop_conditions

TABLE_ROWS = "table rows"
"""A table's rows fingerprint: only a truncation changes its rows, and the diff sees that."""


def stable_hash(document: Any) -> str:
    """SHA-256 of a JSON document with sorted keys: equal documents, equal hashes."""
    payload = json.dumps(document, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Derived:
    """A relation's fingerprint; for a view, the column fingerprints it read and gives."""

    fingerprint: str
    lineage: dict[str, Any] | None = None  # views: {"reads": {...}, "columns": {...}}


def table_fingerprint(definition: Mapping[str, Any]) -> str:
    return stable_hash({"kind": "table", **definition})


def derive(tables: Mapping[str, Mapping[str, Any]], views: Mapping[str, Mapping[str, Any]],
           order: Sequence[str], lineage_of: LineageOf = view_lineage) -> dict[str, Derived]:
    """Fingerprints of every relation, in dependency order, from their document entries
    (tables: `columns`, `primary_key`, `materialized`; views: `query`, `materialized`,
    `reads`). `lineage_of` is `view_lineage`, or a memo of it (`desired.analysis.memo.Analysis`)."""
    derived: dict[str, Derived] = {}
    columns: dict[str, dict[str, str] | None] = {}  # relation -> column -> fingerprint
    rows: dict[str, str] = {}  # relation -> what decides which rows it has
    data: dict[str, str] = {}  # relation -> its fingerprint without keep or fail expectations
    for name in order:
        if name in tables:
            table = tables[name]
            definition = {key: table[key] for key in ("columns", "primary_key", "materialized")}
            data[name] = table_fingerprint(definition)  # what a reader of `t.*` reads
            derived[name] = Derived(table_fingerprint({**definition, "expectations": table[
                "expectations"]}) if table.get("expectations") else data[name])
            columns[name] = {c["name"]: stable_hash({"type": c["type"], "nullable": c["nullable"]})
                             for c in table["columns"]}
            rows[name] = TABLE_ROWS
            continue
        view = views[name]
        reads_of = view["reads"]
        lineage = lineage_of(view["query"], {
            read: tuple(known) if (known := columns.get(read)) is not None else None
            for read in reads_of})
        reads = {read: rows[read] for read in reads_of}
        if lineage.reads is None:
            reads.update({f"{read}.*": data[read] for read in reads_of})
        else:
            reads.update({f"{read}.{column}": _column(columns, read, column)
                          for read, column in lineage.reads})
        definition = {"kind": "view", "query": view["query"],
                      "materialized": view["materialized"], "reads": reads}
        drops = drop_conditions(view.get("expectations", ()))
        if drops:  # they decide which rows the view has
            definition["drops"] = drops
        data[name] = stable_hash(definition)  # what its readers read: no keep or fail
        fingerprint = (stable_hash({**definition, "expectations": view["expectations"]})
                       if view.get("expectations") else data[name])
        if lineage.per_output is not None and lineage.context is not None:
            columns[name] = {output: _dropped(_part(part, reads_of, columns, rows), drops)
                             for output, part in lineage.per_output}
            rows[name] = _dropped(_part(lineage.context, reads_of, columns, rows), drops)
        else:
            columns[name] = (None if lineage.outputs is None
                             else dict.fromkeys(lineage.outputs, data[name]))
            rows[name] = data[name]
        derived[name] = Derived(fingerprint, {"reads": reads, "columns": columns[name]})
    return derived


def _dropped(fingerprint: str, drops: Sequence[str]) -> str:
    """A column's (or the rows') fingerprint, with the DROP ROW conditions that filter them."""
    return stable_hash([fingerprint, list(drops)]) if drops else fingerprint


def _part(part: OutputLineage, reads_of: Sequence[str],
          columns: Mapping[str, Mapping[str, str] | None], rows: Mapping[str, str]) -> str:
    """One output column's (or the context's) fingerprint: its text, the columns it reads,
    and the rows of every relation the view reads."""
    return stable_hash({"text": part.text, "rows": {read: rows[read] for read in reads_of},
                        "reads": {f"{read}.{column}": _column(columns, read, column)
                                  for read, column in part.reads}})


def _column(columns: Mapping[str, Mapping[str, str] | None], read: str, column: str) -> str:
    """The fingerprint of `read`'s column `column`. Lineage names a column of a relation
    only when that relation's columns are known (`columns[read]` is not None)."""
    known = columns[read]
    assert known is not None, read
    return known[column]


def rederive(document: dict[str, Any],
             lineage_of: LineageOf = view_lineage) -> dict[str, Any]:
    """A program document with its fingerprints recomputed by this code (see module doc)."""
    tables, views = document.get("tables", {}), document.get("views", {})
    order = document.get("order") or [*tables, *views]
    derived = derive(tables, views, order, lineage_of)
    return {**document,
            "tables": {name: {**entry, "fingerprint": derived[name].fingerprint}
                       for name, entry in tables.items()},
            "views": {name: {**entry, "fingerprint": derived[name].fingerprint,
                             "lineage": derived[name].lineage}
                      for name, entry in views.items()}}
