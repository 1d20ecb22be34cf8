"""Which output columns of each view carry a masked column's values (the preview's `mask`).

`reconcile.yaml`'s `preview.mask` lists columns whose values a data preview never shows
in its sample rows. Masking an output column *by its name* is not enough: a pull request
writes the view, so `SELECT ssn AS ref` or `concat('n:', name) AS label` would show the
values under another name. So the mask follows column lineage (`desired.analysis.lineage`):

* An entry names a source column: bare (`ssn`), a column of that name in any table or
  view of the pipeline; qualified (`people.ssn`), that relation's column. Matched
  without regard to case. A bare name also masks a view's own output of that name,
  as it always did.
* A view's output column is masked when what it reads, directly or through upstream
  views, includes a masked column, whatever its name or expression. What it reads
  includes the view's context (`WHERE`, `JOIN ... ON`, `GROUP BY`, `HAVING`): a row
  shown because `ssn LIKE '1%'` says something about its `ssn`.
* Conservative where lineage cannot separate the outputs (`DISTINCT`, set operations,
  subqueries, derived tables, a `SELECT *` through something opaque): every output of
  such a view is masked when the view reads a masked column anywhere; where lineage
  cannot resolve the query at all, when any relation it reads has a masked column.

What no mask hides: the counts. Which rows exist and how many (rows, added, removed,
NULLs per column, values changed) follow from every column a view reads, and a new
view's count is whatever its SQL makes it (`docs/github-action.md` says so).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.desired.analysis.lineage import Lineage, view_lineage


@dataclass(frozen=True)
class MaskEntries:
    """The `mask` list, parsed: bare column names, and per relation its named columns."""

    bare: frozenset[str]
    qualified: Mapping[str, frozenset[str]]

    @classmethod
    def parse(cls, entries: Iterable[str]) -> MaskEntries:
        bare: set[str] = set()
        qualified: dict[str, set[str]] = {}
        for entry in entries:
            relation, dot, column = entry.lower().rpartition(".")
            if dot:
                qualified.setdefault(relation, set()).add(column)
            else:
                bare.add(column)
        return cls(frozenset(bare), {r: frozenset(c) for r, c in qualified.items()})

    def names(self, relation: str, column: str) -> bool:
        """Whether an entry names `relation`'s `column` itself."""
        column = column.lower()
        return column in self.bare or column in self.qualified.get(relation.lower(), ())

    def of(self, relation: str) -> frozenset[str]:
        """The (lower-case) column names the entries name in `relation`."""
        return self.bare | self.qualified.get(relation.lower(), frozenset())


@dataclass(frozen=True)
class ColumnMask:
    """Which output columns of one view a preview shows as `***`.

    `by_position` follows the lineage's outputs (None when their names are unknown);
    `names` are the view's own columns an entry names. The preview matches it with the
    columns Spark reports, by position, since Spark names an unaliased expression
    otherwise than sqlglot does; when the two disagree in number, every column is
    masked if any would be."""

    everything: bool = False
    by_position: tuple[bool, ...] | None = None
    names: frozenset[str] = frozenset()

    def masked(self, columns: Sequence[str]) -> list[bool]:
        if self.everything:
            return [True] * len(columns)
        by_position = self.by_position
        if by_position is not None and len(by_position) != len(columns):
            if any(by_position):
                return [True] * len(columns)
            by_position = None
        return [(by_position is not None and by_position[i]) or name.lower() in self.names
                for i, name in enumerate(columns)]


NO_MASK = ColumnMask()

_Taint = frozenset[str] | None  # masked (lower-case) columns of a relation; None: all of them


def masked_columns(document: Mapping[str, Any], entries: Iterable[str]
                   ) -> dict[str, ColumnMask]:
    """Each view of the program `document` (`Program.document()`: tables' `columns`,
    views' `query` and `reads`, `order`) and which of its outputs the `entries` mask."""
    mask = MaskEntries.parse(entries)
    if not mask.bare and not mask.qualified:
        return {}
    tables, views = document.get("tables", {}), document.get("views", {})
    taint: dict[str, _Taint] = {}
    outputs: dict[str, tuple[str, ...] | None] = {}
    result: dict[str, ColumnMask] = {}
    for name in document.get("order") or [*tables, *views]:
        if name in tables:
            columns = tuple(c["name"] for c in tables[name]["columns"])
            outputs[name] = columns
            taint[name] = frozenset(c.lower() for c in columns if mask.names(name, c))
            continue
        reads = list(views[name]["reads"])
        lineage = view_lineage(views[name]["query"], {read: outputs.get(read) for read in reads})
        result[name] = _view_mask(name, lineage, reads, taint, mask)
        outputs[name] = lineage.outputs
        taint[name] = _taint_of(name, lineage, result[name], mask)
    return result


def _view_mask(name: str, lineage: Lineage, reads: Sequence[str],
               taint: Mapping[str, _Taint], mask: MaskEntries) -> ColumnMask:
    """Which outputs of view `name` read a masked column (see the module doc)."""
    names = mask.of(name)
    if lineage.reads is None:  # unresolved: it may read any column of what it reads
        return ColumnMask(everything=any(_any(taint.get(read)) for read in reads), names=names)
    if lineage.per_output is None:  # outputs not separable: each reads the whole query
        whole = any(_reads(taint, ref) for ref in lineage.reads)
        if lineage.outputs is None:
            return ColumnMask(everything=whole, names=names)
        return ColumnMask(everything=whole, by_position=(whole,) * len(lineage.outputs),
                          names=names)
    return ColumnMask(by_position=tuple(any(_reads(taint, ref) for ref in part.reads)
                                        for _, part in lineage.per_output), names=names)


def _taint_of(name: str, lineage: Lineage, view: ColumnMask, mask: MaskEntries) -> _Taint:
    """The masked columns of view `name`, as the views reading it see them."""
    if view.everything:
        return None
    if lineage.outputs is None:  # its readers cannot name its columns for certain
        return mask.of(name) or frozenset()
    flags = view.masked(lineage.outputs)
    return frozenset(c.lower() for c, hidden in zip(lineage.outputs, flags, strict=True)
                     if hidden)


def _any(taint: _Taint | frozenset[str]) -> bool:
    return taint is None or bool(taint)


def _reads(taint: Mapping[str, _Taint], ref: tuple[str, str]) -> bool:
    relation, column = ref
    if relation not in taint:  # not a relation of the program: cannot tell, so masked
        return True
    columns = taint[relation]
    return columns is None or column.lower() in columns
