"""Resolve every name in a view's query against the declared columns, as Spark's analyzer will.

A plan that says ok must not fail at apply for a reason the SQL already shows. Spark
refuses a view whose query names a column no relation in scope has
(`UNRESOLVED_COLUMN`) or an unqualified column that two sources have
(`AMBIGUOUS_REFERENCE`), and Delta cannot store a view whose output has two columns
of one name (`SELECT *` over a join where both sides have `k`, or `a.k, b.k`). Each of
these fails the whole apply, after the plan was approved; here they are refused by
`validate` and `plan`, with the view's file and statement line, the names involved
and what to do.

The rules mirror Spark's, and where they are in doubt they let the query through: a
false refusal of valid SQL costs more than a failure at apply that Spark explains.

Checked against Spark 4's analyzer query by query (lateral aliases, aliases in
`GROUP BY`/`HAVING`/`ORDER BY`, `USING`, semi joins, correlated subqueries, struct
fields, lambdas); the rules:

- A qualified `x.c` resolves where `x` is a source: in its own scope, then, from a
  subquery or generator, in the enclosing ones (a correlated reference). A derived
  table, CTE or set operation branch sees no enclosing query. If no scope has a
  source `x`, `x` is a column and `.c` a struct field (`s.field`): `x` is resolved as
  an unqualified name; fields are not checked.
- An unqualified `c` resolves in the same scopes. Two sources having it is ambiguous,
  unless `c` is a `USING` column or the scope has a `NATURAL` join; a source that has
  it twice (a derived table or CTE selecting `a.k, b.k`) makes it ambiguous too. In
  `HAVING` and `ORDER BY` a name that is also a select alias is not judged ambiguous
  (Spark takes the alias); in `GROUP BY` Spark tries the sources first and refuses.
- An unqualified name that matches no source is unknown only when every source of
  every scope searched has known columns (no relation of unknown columns, no
  `PIVOT`, no generator without column names), it is no select alias (Spark resolves
  lateral column aliases, and aliases in `GROUP BY`/`HAVING`/`ORDER BY`, though not
  in `WHERE` or `ON`), and its scope is not inside a subquery (where a derived table
  might be correlated). Lambda variables are no columns in sqlglot's tree. Names
  Spark calls as functions when no column has them (`user`, ...) are left to
  `safety.check_bare_names`.
- Not checked: a set operation's own `ORDER BY` (it resolves against the output),
  three-part names (`t.s.f`), and unqualified names in `HAVING`, which sqlglot's
  scopes leave out.
- The output: the top-level `SELECT` (a set operation's first branch) with stars
  expanded, a `USING` column once, the right side of a semi or anti join not at all.
  Two equal names (case-insensitive, like Spark and Delta) are refused, unnamed
  expressions by the name Spark gives them (`count(1)` twice: `_spark_named`), and so
  is a name with a dot or a backtick (`UNADDRESSABLE`).

Why not sqlglot's `qualify`: it copies and rewrites the tree, about 1 ms a view (a
second on a 1,000-view plan), and says "could not be resolved" alike for an unknown
and an ambiguous name. The scopes it is built on (`traverse_scope`, about 0.05 ms a
view) give all that is needed. Verdicts are memoised per (query, schemas), as lineage's
are, so a program built again in one process is not walked again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.scope import Scope, traverse_scope

from reconciler.desired.analysis.scope_rules import (
    has_natural_join,
    in_filter,
    scope_chain,
    select_aliases,
    source_named,
    using_columns,
)
from reconciler.desired.parsing.safety import LITERAL_FUNCTIONS
from reconciler.desired.parsing.sql import SPARK
from reconciler.desired.parsing.syntax_errors import KEYWORDS
from reconciler.support.errors import ReconcileError, closest, did_you_mean

Columns = tuple[str, ...] | None  # None: unknown
SchemaKey = tuple[tuple[str, Columns], ...]
Origin = str | exp.Expr  # where an output column comes from: `x.k`, or its projection

DISTINCT_ALIASES = "give them distinct aliases (AS ...)"
UNADDRESSABLE = frozenset(".`")
"""Characters of a column name the engine cannot pass through Spark's column references
(`x * 1.5` unaliased is named `(x * 1.5)`); every other character is stored (Delta's
column mapping: `engine.delta.writers.COLUMN_MAPPING`)."""
UNNAMED = ""  # an output column Spark names after its expression
_ALIAS_CLAUSES = (exp.Having, exp.Order)  # where an alias may win over two sources
_CACHE_SIZE = 8192
_cache: dict[tuple[str, SchemaKey], tuple[str | None, Columns, int | None]] = {}


def check_view_resolution(tree: exp.Query, query: str,
                          schemas: Mapping[str, Sequence[str] | None], view: str,
                          error_at: Callable[[str, exp.Expr | None], ReconcileError],
                          scopes: Sequence[Scope] = ()) -> Columns:
    """Refuse a view whose query Spark could not resolve, or whose output Delta could not
    store (see the module docstring), naming the view, the names and the sources; return
    its output column names as Spark names them, for the views that read it.

    `tree` is the parsed query, `query` its canonical text (the cache key with `schemas`:
    the columns of each relation the view reads, as this function returned them for a
    view; None when unknown). An output Spark names after its expression (`sum(x)`) is
    returned as '': a reader may still name it, so a name missing where '' is stays in
    doubt. (Lineage's output names differ there: it names `(x)` and `struct(...).f` too.)
    `error_at` makes the error at the name at fault, when there is one
    (`ViewStatement.error_at`); `scopes` are the tree's (`traverse_scope`), when its
    statement kept them (`desired.parsing.sql`).
    """
    key = (query, tuple(sorted((name, tuple(columns) if columns is not None else None)
                               for name, columns in schemas.items())))
    if key not in _cache:
        if len(_cache) >= _CACHE_SIZE:
            del _cache[next(iter(_cache))]  # the oldest entry
        _cache[key] = _resolved(tree, dict(key[1]), scopes)
    problem, outputs, culprit = _cache[key]
    if problem is not None:
        # The culprit is kept by its place in the walk: a cached verdict may be of another
        # tree of the same query (a program built again), with the same shape.
        node = next((node for index, node in enumerate(tree.walk()) if index == culprit), None)
        raise error_at(f"view '{view}': {problem}", node)
    return outputs


def resolve(tree: exp.Query, schemas: Mapping[str, Columns],
            scopes: Sequence[Scope] = ()) -> tuple[str | None, Columns]:
    """What Spark would refuse in `tree`, in one sentence (None if nothing), and the output
    names. A query sqlglot cannot scope is let through with unknown outputs: `desired.parsing.sql`
    already analysed it, so any doubt is sqlglot's. `scopes`: the tree's, if already built."""
    return _resolved(tree, schemas, scopes)[:2]


def _resolved(tree: exp.Query, schemas: Mapping[str, Columns],
              scopes: Sequence[Scope] = ()) -> tuple[str | None, Columns, int | None]:
    """`resolve`, with the place in `tree.walk()` of the name at fault (None: none is)."""
    try:
        resolver = _Resolver(schemas)
        problem = resolver.problem(tree, scopes)
    except SqlglotError:
        return None, None, None
    culprit = resolver.culprit
    place = (None if culprit is None else
             next((index for index, node in enumerate(tree.walk()) if node is culprit), None))
    return problem, resolver.root_outputs, place


def resolution_problem(tree: exp.Query, schemas: Mapping[str, Columns]) -> str | None:
    """What Spark would refuse in `tree`, or None (`resolve` without the outputs)."""
    return resolve(tree, schemas)[0]


class _Resolver:
    """One query's walk: its scopes, innermost first, each column judged in its own scope;
    then the output's names. Output names are memoised per scope, since a CTE's are asked
    for by every reference to it."""

    def __init__(self, schemas: Mapping[str, Columns]):
        self.schemas = {name.lower(): None if columns is None
                        else tuple(c.lower() for c in columns)
                        for name, columns in schemas.items()}
        self.scope_of: dict[int, Scope] = {}  # id(expression) -> its scope
        self.outputs: dict[int, Columns] = {}  # id(scope) -> its output names
        self.root_outputs: Columns = None
        self.culprit: exp.Expr | None = None  # the name or projection at fault

    def problem(self, tree: exp.Query, scopes: Sequence[Scope] = ()) -> str | None:
        scopes = scopes or traverse_scope(tree)
        self.scope_of = {id(scope.expression): scope for scope in scopes}
        seen: set[int] = set()
        for scope in scopes:  # innermost first: an outer scope also lists the correlated
            for column in scope.columns:  # columns of its subqueries, judged there already
                if id(column) in seen:
                    continue
                seen.add(id(column))
                if isinstance(scope.expression, exp.SetOperation):
                    continue
                problem = self._column(scope, column)
                if problem is not None:
                    self.culprit = column
                    return problem
        self.root_outputs = self._outputs(scopes[-1])
        return self._unstorable_output(scopes[-1])

    # -- references --------------------------------------------------------------------
    def _column(self, scope: Scope, column: exp.Column) -> str | None:
        if column.args.get("db") or column.args.get("catalog"):
            return None
        name = column.name.lower()
        qualifier = column.table.lower()
        if not qualifier:
            return self._unqualified(scope, name, column)
        for current in scope_chain(scope):
            source = source_named(current, qualifier)
            if source is None:
                continue
            columns = self._columns(source)
            if (columns is None or columns.count(name) == 1 or self._is_column(scope, qualifier)
                    or (name not in columns and UNNAMED in columns)):
                return None  # (`x.c` may be the field c of a column x, or a Spark-made name)
            if name not in columns:
                return (f"column '{qualifier}.{name}' does not exist: {qualifier} has columns "
                        f"{_listing(columns)}" + did_you_mean(name, columns))
            return (f"column reference '{qualifier}.{name}' is ambiguous: {qualifier} has "
                    f"{columns.count(name)} columns named '{name}'; {DISTINCT_ALIASES} "
                    f"where {qualifier} is defined")
        return self._unqualified(scope, qualifier, column, f"{qualifier}.{name}")  # a field

    def _unqualified(self, scope: Scope, name: str, column: exp.Column,
                     written: str | None = None) -> str | None:
        """Resolve `name` as Spark does an unqualified one (`written` is how the reference
        reads when `name` is a struct column followed by a field)."""
        if name in LITERAL_FUNCTIONS or not name:
            return None
        last = scope
        for current in scope_chain(scope):
            if current.pivots:
                return None
            aliases = select_aliases(current)
            matches, complete = self._matches(current, name)
            found = sum(count for _, count in matches)
            if found == 1 or (found == 0 and self._in_semi_join(current, name)):
                return None
            if found > 1:
                if (name in using_columns(current) or has_natural_join(current)
                        or (name in aliases and column.find_ancestor(*_ALIAS_CLAUSES))):
                    return None
                return _ambiguous(name, matches)
            if (name in aliases and (current is not scope or not in_filter(column))) \
                    or not complete:
                return None  # a select alias, or maybe a column of a source not known
            last = current
        if last.can_be_correlated:
            return None  # a derived table or CTE inside a subquery: maybe correlated
        known = [column for current in scope_chain(scope)
                 for _, source in current.selected_sources.values()
                 for column in self._columns(source) or ()]
        return (f"column '{written or name}' does not exist in {self._described(scope)}"
                + _suggestion(name, known))

    def _matches(self, scope: Scope, name: str) -> tuple[list[tuple[str, int]], bool]:
        """The selected sources of `scope` that have column `name`, with how many times,
        and whether every source's columns are known."""
        matches = []
        complete = True
        for alias, (_, source) in scope.selected_sources.items():
            columns = self._columns(source)
            if columns is None:
                complete = False
            elif name in columns:
                matches.append((alias, columns.count(name)))
            elif UNNAMED in columns:
                complete = False  # `name` may be the name Spark gives an expression
        return matches, complete

    def _in_semi_join(self, scope: Scope, name: str) -> bool:
        """Whether the right side of a semi or anti join has `name` (its `ON` may use it)."""
        for alias in scope.semi_or_anti_join_tables:
            source = scope.sources.get(alias)
            columns = self._columns(source) if source is not None else None
            if columns is None or name in columns:
                return True
        return False

    def _is_column(self, scope: Scope, name: str) -> bool:
        """Whether some source in `scope` or an enclosing scope may have column `name`."""
        for current in scope_chain(scope):
            for _, source in current.selected_sources.values():
                columns = self._columns(source)
                if columns is None or name in columns:
                    return True
        return False

    def _described(self, scope: Scope) -> str:
        """The sources a name was looked up in, with their columns, for an error message."""
        parts = []
        for alias, (_, source) in scope.selected_sources.items():
            parts.append(f"{alias} ({_listing(self._columns(source) or ())})")
        return " or ".join(parts) if parts else "any relation (the query reads none)"

    # -- columns and outputs -----------------------------------------------------------------
    def _columns(self, source: exp.Table | Scope) -> Columns:
        if isinstance(source, exp.Table):
            return self.schemas.get(source.name.lower())
        return self._outputs(source)

    def _outputs(self, scope: Scope) -> Columns:
        """Output names of a derived table, CTE or generator: its column list when it has
        one, else its (first branch's) projections with stars expanded."""
        if id(scope) not in self.outputs:
            self.outputs[id(scope)] = None  # a query that reaches itself stays unknown
            self.outputs[id(scope)] = self._compute_outputs(scope)
        return self.outputs[id(scope)]

    def _compute_outputs(self, scope: Scope) -> Columns:
        if scope.outer_columns:
            return tuple(name.lower() for name in scope.outer_columns)
        projections = self._projections(scope)
        if projections is None:
            return None
        return tuple(name for name, _ in projections)

    def _projections(self, scope: Scope) -> list[tuple[str, Origin]] | None:
        """(name, where it comes from) of each output column of `scope`, stars expanded;
        None when some are unknown. The origin is the projection itself, its text generated
        only for an error (generating costs more than the rest of the check)."""
        expression = scope.expression
        while isinstance(expression, exp.SetOperation):
            expression = expression.left.unnest()
        branch = self.scope_of.get(id(expression))
        if branch is None or not isinstance(expression, exp.Select):
            return None
        found: list[tuple[str, Origin]] = []
        for projection in expression.selects:
            if isinstance(projection, exp.Star) or (isinstance(projection, exp.Column)
                                                    and projection.is_star):
                expanded = self._star(branch, projection)
                if expanded is None:
                    return None
                found.extend(expanded)
            else:
                found.append((_output_name(projection), projection))
        return found

    def _star(self, scope: Scope, star: exp.Star | exp.Column) -> list[tuple[str, Origin]] | None:
        """The columns `*` or `x.*` selects in `scope`, with the source each comes from."""
        target = star.this if isinstance(star, exp.Column) else star
        if any(target.args.get(key) for key in ("except_", "replace", "rename")):
            return None
        if isinstance(star, exp.Column):
            qualifier = star.table.lower()
            sources = [(qualifier, source_named(scope, qualifier))]
            using: set[str] = set()
        else:
            if has_natural_join(scope):
                return None
            sources = [(alias, source) for alias, (_, source) in scope.selected_sources.items()]
            using = using_columns(scope)
        found: list[tuple[str, Origin]] = []
        for alias, source in sources:
            columns = self._columns(source) if source is not None else None
            if columns is None:
                return None
            found.extend((name, f"{alias}.{name}") for name in columns
                         if not (name in using and any(name == seen for seen, _ in found)))
        return found

    def _unstorable_output(self, root: Scope) -> str | None:
        projections = self._projections(root)
        if projections is None:
            return None
        origins: dict[str, list[Origin]] = {}
        for name, origin in projections:
            if not name and isinstance(origin, exp.Expression):
                name = _spark_named(origin)
            origins.setdefault(name, []).append(origin)
        for name, where in origins.items():
            self.culprit = next((o for o in reversed(where) if isinstance(o, exp.Expression)),
                                None)
            if UNADDRESSABLE & set(name):
                return (f"output column '{name}' has a '.' or a '`' in its name, "
                        "which Spark reads as a field access or a quote: give it an alias "
                        "(AS ...) without them")
            if len(where) > 1:
                texts = [o if isinstance(o, str) else o.sql(dialect=SPARK) for o in where]
                return (f"output column '{name}' appears {len(where)} times "
                        f"({', '.join(texts)}): Delta cannot store two columns of one name; "
                        f"{DISTINCT_ALIASES}")
        self.culprit = None
        return None


def _output_name(projection: exp.Expr) -> str:
    """The name Spark gives a projection's column: its alias; a column's (a struct field's)
    own name, also in parentheses or cast; else UNNAMED (Spark names it after the
    expression, `sum(x)`, `CAST(CAST(x AS INT) AS STRING)`, `struct(a, b).a`)."""
    if isinstance(projection, exp.Alias):
        return projection.alias.lower()
    node = projection
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Cast):
        node = node.this
        while isinstance(node, exp.Paren):
            node = node.this
    return node.name.lower() if isinstance(node, exp.Column) else UNNAMED


def _spark_named(projection: exp.Expr) -> str:
    """The name Spark gives an unnamed projection, as far as it matters for telling two
    apart: its text without qualifiers, lower case (Spark's `count(1)` for `count(*)`). Two
    `count(*)` or `avg(a.x)` and `avg(b.x)` get one name in Spark, which Delta cannot
    store twice."""
    bare = projection.transform(
        lambda node: exp.column(node.name, quoted=True) if isinstance(node, exp.Column)
        and node.table else node)
    return bare.sql(dialect=SPARK).lower().replace("count(*)", "count(1)").replace("`", "")
















def _ambiguous(name: str, matches: list[tuple[str, int]]) -> str:
    if len(matches) == 1:
        source = matches[0][0]
        return (f"column reference '{name}' is ambiguous: {source} has {matches[0][1]} "
                f"columns named '{name}'; {DISTINCT_ALIASES} where {source} is defined")
    sources = [source for source, _ in matches]
    return (f"column reference '{name}' is ambiguous: it is a column of "
            f"{', '.join(sources[:-1])} and {sources[-1]}; qualify it "
            f"({' or '.join(f'{source}.{name}' for source in sources)})")


def _suggestion(name: str, columns: Sequence[str]) -> str:
    """The closest column to a misspelt `name`, else the keyword it may be meant as
    (`select distnct a`: sqlglot reads a column `distnct` aliased `a`), or ''."""
    if found := did_you_mean(name, columns):
        return found
    keyword = closest(name, KEYWORDS)
    return f" (did you mean the keyword {keyword[0]}?)" if keyword else ""


def _listing(columns: tuple[str, ...]) -> str:
    """Columns for a message: the first twelve (a wide table would drown the line)."""
    named = [column for column in columns if column != UNNAMED]
    return ", ".join(named[:12]) + (", ..." if len(named) > 12 else "")
