"""Spark's rules for what a query scope sees, read off sqlglot's `Scope`.

sqlglot's scopes list a query's sources and columns, but not Spark's rules for them:
which enclosing scopes a correlated reference reaches, how a source's alias is matched,
which select aliases a clause may use, and what `USING` and `NATURAL` joins do to a
name. `desired.model.resolution` judges each name with these; they are kept apart so the rules
(each checked against Spark 4's analyzer) read in one place, away from the messages.
"""

from __future__ import annotations

from collections.abc import Iterable

from sqlglot import exp
from sqlglot.optimizer.scope import Scope


def scope_chain(scope: Scope) -> Iterable[Scope]:
    """`scope`, then, from a subquery or a generator, the scopes enclosing it (where a
    correlated reference resolves). A derived table, CTE or set operation branch sees no
    enclosing query's sources in Spark (its parent's sources even include itself)."""
    current: Scope | None = scope
    while current is not None:
        yield current
        if not (current.is_subquery or current.is_udtf):
            return
        current = current.parent


def source_named(scope: Scope, qualifier: str) -> exp.Table | Scope | None:
    """The source `scope` reads as `qualifier` in its `FROM`/`JOIN` (semi and anti joins
    too), the alias compared without case as Spark does."""
    for alias, _ in scope.references:
        if alias.lower() == qualifier:
            return scope.sources.get(alias)
    return None


def select_aliases(scope: Scope) -> set[str]:
    """The aliases `scope`'s select list gives (lower case): Spark resolves a name to one
    in `GROUP BY`, `HAVING`, `ORDER BY` and a later projection, not in `WHERE` or `ON`."""
    expression = scope.expression
    if not isinstance(expression, exp.Select):
        return set()
    return {projection.alias.lower() for projection in expression.selects
            if isinstance(projection, exp.Alias)}


def in_filter(column: exp.Column) -> bool:
    """Whether `column` is in a `WHERE` or a join's `ON`, where Spark takes no select alias."""
    return isinstance(column.find_ancestor(exp.Where, exp.Join, exp.Select), (exp.Where, exp.Join))


def joins_of(scope: Scope) -> list[exp.Join]:
    """The joins of `scope`'s select (none for a set operation)."""
    expression = scope.expression
    return list(expression.args.get("joins") or []) if isinstance(expression, exp.Select) else []


def using_columns(scope: Scope) -> set[str]:
    """Columns joined with `USING (...)` in `scope`: one column each in Spark's output."""
    return {identifier.name.lower() for join in joins_of(scope)
            for identifier in join.args.get("using") or []}


def has_natural_join(scope: Scope) -> bool:
    """Whether `scope` has a `NATURAL` join: its shared names are one column, never ambiguous."""
    return any(str(join.args.get("method") or "").upper() == "NATURAL" for join in joins_of(scope))
