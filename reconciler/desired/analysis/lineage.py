"""Column-level lineage: which columns of which relations a view reads, and per output column.

Feldera marks every reader of a modified relation as modified. Here a view
depends on the columns it actually reads: a column added to a table, or to a
view, modifies only the views that read it (`SELECT *` reads everything), and a
widened column modifies only its readers. That needs, for each view:

- `reads`: every (relation, column) the query reads anywhere (filters, joins,
  projections, subqueries), stars expanded against the known columns;
- `outputs`: its output column names (a reader's `SELECT *` and unqualified
  names resolve against them);
- `per_output`: for a plain `SELECT` over tables and views (no `DISTINCT`, no
  derived tables or subqueries), what each output column's values depend on:
  its own expression and the query's *context* (everything but the projection
  list: `FROM`/`JOIN`/`WHERE`/`GROUP BY`/`HAVING`/..., and whether the query
  aggregates). Adding a column to the projection list changes neither for the
  others. Otherwise every output column depends on the whole query.

The resolution walks sqlglot's scopes (`traverse_scope`), cheap enough for a
1,000-view plan; anything it cannot resolve for certain (an unknown or ambiguous
name, a correlated reference, a relation whose columns are unknown) makes the
view read every column of every relation it reads: conservative, never wrong.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from reconciler.desired.parsing.canonical import drop_positions
from reconciler.desired.parsing.sql import SPARK, parse_query

ColumnRef = tuple[str, str]  # (relation, column)


@dataclass(frozen=True)
class OutputLineage:
    """What one output column's values depend on: its text and the columns it reads."""

    text: str
    reads: tuple[ColumnRef, ...]


@dataclass(frozen=True)
class Lineage:
    reads: tuple[ColumnRef, ...] | None  # None: every column of every relation read
    outputs: tuple[str, ...] | None  # None: unknown (a star over an unknown relation)
    per_output: tuple[tuple[str, OutputLineage], ...] | None = None
    context: OutputLineage | None = None  # with per_output: what decides which rows exist


LineageOf = Callable[[str, Mapping[str, Sequence[str] | None]], Lineage]
"""`view_lineage`, or a memo of it (`desired.analysis.memo.Analysis.lineage`)."""


class _Unresolved(Exception):
    """A name the walk cannot resolve for certain: fall back to "reads everything"."""


def view_lineage(query: str, schemas: Mapping[str, Sequence[str] | None]) -> Lineage:
    """Lineage of a view's canonical `query` over relations whose columns are `schemas`
    (None when a relation's columns are unknown). Cached: planning derives the lineage of
    the committed program too, whose unchanged views ask the same questions."""
    key = tuple(sorted((name, tuple(columns) if columns is not None else None)
                       for name, columns in schemas.items()))
    return _cached(query, key)


@lru_cache(maxsize=8192)
def _cached(query: str, schemas: tuple[tuple[str, tuple[str, ...] | None], ...]) -> Lineage:
    try:
        parsed = parse_query(query)
        if not isinstance(parsed, exp.Query):
            return Lineage(reads=None, outputs=None)
        return _Walk(dict(schemas)).lineage(parsed)
    except (_Unresolved, SqlglotError):
        return Lineage(reads=None, outputs=None)


class _Walk:
    def __init__(self, schemas: dict[str, tuple[str, ...] | None]):
        self.schemas = schemas
        self.scopes: list[Scope] = []

    def lineage(self, tree: exp.Query) -> Lineage:
        scopes = self.scopes = traverse_scope(tree)
        reads: set[ColumnRef] = set()
        resolved: dict[int, ColumnRef | None] = {}  # id(Column) -> source column (None: derived)
        for scope in scopes:  # innermost first: an outer scope also lists its subqueries'
            for column in scope.columns:  # columns, which their own scope resolved already
                if id(column) not in resolved:
                    resolved[id(column)] = self._resolve(scope, column)
            for star in self._stars(scope):
                reads.update(star)
        reads.update(ref for ref in resolved.values() if ref is not None)
        root = scopes[-1]
        outputs = self._outputs(root)
        per_output = self._per_output(root, resolved)
        return Lineage(reads=tuple(sorted(reads)), outputs=outputs,
                       per_output=None if per_output is None else per_output[0],
                       context=None if per_output is None else per_output[1])

    # -- names -------------------------------------------------------------------------
    def _columns_of(self, source: exp.Table | Scope) -> tuple[str, ...]:
        if isinstance(source, exp.Table):
            columns = self.schemas.get(source.name)
            if columns is None:
                raise _Unresolved(source.name)
            return columns
        return self._outputs(source)

    def _resolve(self, scope: Scope, column: exp.Column) -> ColumnRef | None:
        """The table column `column` names, or None when it names a derived table's output
        (that table's own scope counts what it reads). A name not found in its own scope is
        looked up in the enclosing ones (a correlated subquery), as Spark does."""
        current: Scope | None = scope
        while current is not None:
            source = self._source_of(current, column)
            if source is not None:
                if column.name not in self._columns_of(source):
                    raise _Unresolved(column.sql())
                return None if isinstance(source, Scope) else (source.name, column.name)
            current = current.parent
        raise _Unresolved(column.sql())

    def _source_of(self, scope: Scope, column: exp.Column) -> exp.Table | Scope | None:
        if column.table:
            return scope.sources.get(column.table)
        candidates = [source for _, source in scope.selected_sources.values()
                      if column.name in self._columns_of(source)]
        if len(candidates) > 1:
            raise _Unresolved(f"ambiguous {column.name}")
        return candidates[0] if candidates else None

    def _stars(self, scope: Scope) -> list[list[ColumnRef]]:
        expression = scope.expression
        if not isinstance(expression, exp.Select):
            return []
        found = []
        for select in expression.selects:
            for source in self._star_sources(scope, select):
                if isinstance(source, exp.Table):
                    found.append([(source.name, c) for c in self._columns_of(source)])
        return found

    def _star_sources(self, scope: Scope, select: exp.Expr) -> list[exp.Table | Scope]:
        if isinstance(select, exp.Star):
            return [source for _, source in scope.selected_sources.values()]
        if isinstance(select, exp.Column) and select.is_star:
            source = scope.sources.get(select.table)
            if source is None:
                raise _Unresolved(select.sql())
            return [source]
        return []

    def _outputs(self, scope: Scope) -> tuple[str, ...]:
        """Output names of a scope's query, stars expanded; a set operation's are its first
        branch's."""
        expression = scope.expression
        while isinstance(expression, exp.SetOperation):
            expression = expression.left
        if not isinstance(expression, exp.Select):
            raise _Unresolved("not a SELECT")
        branch = next((s for s in self.scopes if s.expression is expression), None)
        if branch is None:
            raise _Unresolved("set operation branch")
        names: list[str] = []
        for select in expression.selects:
            sources = self._star_sources(branch, select)
            if sources:
                for source in sources:
                    names.extend(self._columns_of(source))
            else:
                names.append(select.alias_or_name)
        return tuple(names)

    # -- per output column -----------------------------------------------------------------
    def _per_output(self, root: Scope, resolved: dict[int, ColumnRef | None]
                    ) -> tuple[tuple[tuple[str, OutputLineage], ...], OutputLineage] | None:
        select = root.expression
        if (not isinstance(select, exp.Select) or select.args.get("distinct")
                or root.subquery_scopes or root.derived_table_scopes or root.cte_scopes
                or root.set_operation_scopes or root.udtf_scopes
                or select.args.get("with_")):
            return None
        in_projection = {id(c) for p in select.selects for c in p.find_all(exp.Column)}
        context_refs: set[ColumnRef] = set()
        for column in select.find_all(exp.Column):
            if id(column) in in_projection:
                continue
            ref = resolved.get(id(column))
            if ref is None:
                return None  # an alias used in HAVING/ORDER BY ties outputs together
            context_refs.add(ref)
        aggregates = any(p.find(exp.AggFunc) and not p.find(exp.Window) for p in select.selects)
        drop_positions(select)  # cheaper copies for .sql() below; no error here reads them
        context_text = f"{_without_projections(select)} aggregates={aggregates}"
        outputs: list[tuple[str, OutputLineage]] = []
        for projection in select.selects:
            sources = self._star_sources(root, projection)
            if sources:
                for source in sources:
                    if not isinstance(source, exp.Table):
                        return None
                    for name in self._columns_of(source):
                        outputs.append((name, OutputLineage(
                            f"{source.name}.{name} | {context_text}",
                            tuple(sorted({(source.name, name), *context_refs})))))
                continue
            found = {resolved.get(id(c)) for c in projection.find_all(exp.Column)}
            own = {ref for ref in found if ref is not None}
            if len(own) != len(found):  # a column not resolved
                return None
            outputs.append((projection.alias_or_name, OutputLineage(
                f"{projection.sql(dialect=SPARK)} | {context_text}",
                tuple(sorted({*own, *context_refs})))))
        names = [name for name, _ in outputs]
        if len(set(names)) != len(names):
            return None
        return tuple(outputs), OutputLineage(context_text, tuple(sorted(context_refs)))


def _without_projections(select: exp.Select) -> str:
    """The text of everything in `select` but its projection list (generated part by part:
    copying the tree to drop the projections would cost more than the rest of the walk)."""
    parts = []
    for key, value in sorted(select.args.items()):
        if key == "expressions" or value is None or value == []:
            continue
        values = value if isinstance(value, list) else [value]
        parts.append(key + "=" + ",".join(v.sql(dialect=SPARK) if isinstance(v, exp.Expression)
                                          else str(v) for v in values))
    return " ".join(parts)
