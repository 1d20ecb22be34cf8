"""Which queries can be recomputed over only the keys a step touches (the `Keyed` shape).

Outer joins, `EXISTS`/`NOT EXISTS`, `IN (subquery)` and correlated subqueries are
not linear, but in most reporting SQL they only ever combine rows that share a
key: `o_orderkey = l_orderkey` in a join, `WHERE l_orderkey = o_orderkey` in an
`EXISTS`, `l_partkey = p_partkey` in a correlated `AVG`. Such a query is a
disjoint union over key values, `Q(R) = ⊎_k Q(R|k)` (`R|k`: the rows of `R`
whose key is `k`), so its change is the query over just the touched keys,
before and after the step (`engine/maintenance/outer.py`):

    Δ = Q(R'|K) - Q(R|K)      K = the keys of this step's changed rows

This module finds that key. Column equalities (top-level conjuncts of `ON` and
`WHERE`, correlations, `x IN (SELECT y ...)`) join column slots into classes; the
class covering the most relation occurrences is the key. The query is partitioned
by it when:

* each select's keyed occurrences are tied to each other by its own equalities,
  and each subquery's to the enclosing query by a correlation or by `IN`;
* an outer join's keyed occurrence is tied by its own `ON` (else whether a row
  matched anything depends on other keys);
* every aggregate, `GROUP BY` or `DISTINCT` works within one key: the top-level
  `GROUP BY` includes the key, a subquery is correlated on it or groups by it;
* `NOT IN` binds nothing: a NULL anywhere in its subquery decides the answer
  for every row, so an uncorrelated one is read whole (a constant of the step
  while its relations are unchanged); correlated on the key, the NULL rule
  holds within each key, as the subquery only ever sees that key's rows.

The same holds through the rest of a query when every operator keeps rows of one
key together: a derived table (a CTE is written out as one, `desired/analysis/inline.py`) that
groups by the key or keeps it in a column the enclosing select joins on; a window
function partitioned by the key; a set operation (UNION, INTERSECT, EXCEPT, their
ALL forms) with the key in one column of every branch. A window without PARTITION
BY, or a RIGHT or FULL join that keeps a relation read whole, is not split.

Occurrences outside the key class (dimension tables, an uncorrelated subquery)
are read whole: while their relations do not change they are constants of the
step; a step that changes one compares the whole query, old against new
(exact, not cheaper). A query where every relation has such an occurrence
would gain nothing and is recomputed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from reconciler.desired.analysis.partitioning import Columns, KeyFallback, Partitioning
from reconciler.desired.analysis.query_parts import from_of, occurrences

__all__ = ["Columns", "Equated", "KeyFallback", "Keyed", "equated_columns", "from_of",
           "keyed", "named_columns", "occurrences"]

Equated = tuple[tuple[tuple[exp.Table, str], ...], ...]  # classes of (occurrence, column)


@dataclass(frozen=True)
class Keyed:
    """A query recomputed over the touched keys. `keys[i]` is the key column of the i-th
    relation occurrence (`occurrences(select)` order), None when it is read whole."""

    select: exp.Select
    keys: tuple[str | None, ...]
    output_key: int | None = None  # the output column holding each row's key, if one does

def named_columns(query: exp.Expr) -> set[str] | None:
    """Every name the query writes (lowercase), a superset of the columns it reads; None when
    it can read columns it does not name: a `*` in a select list (not `COUNT(*)`, not an
    `EXISTS` subquery's, whose columns nothing reads) or a `NATURAL` join."""
    for star in query.find_all(exp.Star):
        select = star.find_ancestor(exp.Select)
        if not isinstance(star.parent, exp.Count) and not (
                select is not None and isinstance(select.parent, exp.Exists)):
            return None
    if any(join.args.get("method") for join in query.find_all(exp.Join)):
        return None
    return {identifier.name.lower() for identifier in query.find_all(exp.Identifier)}

def keyed(select: exp.Select, columns: Columns,
          check: Callable[[exp.Select], None]) -> Keyed:
    """The `Keyed` shape of `select`, or `KeyFallback`. `check` refuses clauses no shape
    supports (ORDER BY, LIMIT, ...) in the select and each subquery."""
    partitioning = Partitioning(select, columns, check)
    return Keyed(select, partitioning.keys(), partitioning.output_key())


def equated_columns(select: exp.Select, columns: Columns) -> Equated:
    """The select's classes of columns made equal by its top-level `ON`/`WHERE` equalities,
    each as (relation occurrence, column) pairs; none when a column cannot be placed.
    In an inner join every output row's columns of one class hold one value, so the
    rows a change can meet lie within the change's range of that value (`linear`)."""
    return Partitioning(select, columns, lambda _: None).equated()
