"""Common table expressions written out where they are used, for maintenance analysis.

A CTE is a name for a query: `WITH s AS (q) SELECT ... FROM s` means the same as
`SELECT ... FROM (q) AS s`. Maintenance reasons about relation occurrences and
derived tables (`desired/analysis/keyed.py`), so each reference to a CTE becomes the CTE's query
as a derived table, keeping the reference's alias (or the CTE's name), later CTEs
seeing earlier ones and a nested `WITH` shadowing an outer one of the same name.

A CTE used several times is written out at each use: a keyed view recomputes only
the keys a step touches, so each use costs the touched keys' rows, not the CTE's.
"""

from __future__ import annotations

from typing import TypeVar

from sqlglot import exp

Tree = TypeVar("Tree", bound=exp.Expr)
"""A query's tree, or a statement holding one: what `inline_ctes` takes it returns."""


class CannotInline(Exception):
    """A `WITH` that has no derived-table form here; the message says which."""


def inline_ctes(query: Tree) -> Tree:
    """`query` (a copy when it has a `WITH` anywhere) with every CTE reference replaced."""
    if query.find(exp.With) is None:  # no WITH node, so no query holding one: as it is
        return query
    query = query.copy()
    # Innermost first: a nested WITH is resolved before the one around it.
    holders = [node for node in query.walk(bfs=False) if _with_of(node) is not None]
    for holder in reversed(holders):
        _inline_one(holder)
    return query


def _with_of(node: exp.Expr) -> exp.With | None:
    found = node.args.get("with_") or node.args.get("with")  # sqlglot 30 says `with_`
    return found if isinstance(found, exp.With) else None


def _inline_one(holder: exp.Expr) -> None:
    with_ = _with_of(holder)
    assert with_ is not None
    if with_.args.get("recursive"):
        raise CannotInline("WITH RECURSIVE")
    bodies: dict[str, exp.Expr] = {}
    for cte in with_.expressions:
        alias = cte.args.get("alias")
        if alias is not None and alias.columns:
            raise CannotInline(f"CTE {cte.alias_or_name} with a column list")
        bodies[cte.alias_or_name.lower()] = _substituted(cte.this.copy(), bodies)
    holder.set("with_" if "with_" in holder.args else "with", None)
    _substituted(holder, bodies)


def _substituted(node: exp.Expr, bodies: dict[str, exp.Expr]) -> exp.Expr:
    """Each table reference named like a CTE in `bodies`, replaced by its query."""
    for table in list(node.find_all(exp.Table)):
        name = table.name.lower()
        if name not in bodies or table.args.get("db") or not isinstance(table.this,
                                                                         exp.Identifier):
            continue
        alias = exp.TableAlias(this=exp.to_identifier(table.alias or table.name))
        replacement = exp.Subquery(this=bodies[name].copy(), alias=alias)
        if table is node:
            return replacement
        table.replace(replacement)
    return node
