"""A view's aggregating subqueries as views of their own, so the view can be maintained.

An aggregate inside a view's query that is not grouped by the key the rest of the query
is split by (a derived table `(SELECT ..., SUM(x) FROM ... GROUP BY d) AS t`, a set operation's
branch that groups, a CTE of either kind) is what most often makes a view
recomputed (`desired/analysis/partitioning.py`: its groups mix the keys). Given a name, such an
aggregate is an ordinary maintained aggregate with its own per-group state, and the
query around it reads its change as it reads any view's: this is how Feldera and
Materialize compose operators, each with its own state (an "arrangement"). Here the
name is a *part* of the view (`<view>__<alias>`): a view of the program like any other
(planned, bootstrapped, pinned in the manifest and maintained), marked as its view's
(`View.part_of`), so it is not published and the plan says whose it is.

A view is split only when that makes it maintained: each part maintained (an aggregate,
or a query recomputed over the keys a step touches) and the view, reading the parts,
maintained too; otherwise it stays whole and is recomputed for the reason its own
analysis gives. A part repeated (a CTE used twice) is one part. What may be a part:

* an aggregating derived table of a FROM or JOIN, or an aggregating branch of a set
  operation, outside expression subqueries (which may be correlated); a later branch's
  columns are named as the operation names them, after its first branch;
* a set operation anywhere (a derived table, an `EXISTS`'s, the subquery of an `IN`) when
  it reads nothing of the query around it (set operations inside expression subqueries
  have no key rule);
* a select that only names and windows the columns of an aggregating derived table
  (`SELECT item, RANK() OVER (ORDER BY ratio) FROM (... GROUP BY item) t`), first merged
  into that aggregate: windows over its groups (`desired/analysis/group_windows.py`).

Parts are taken innermost first, so an aggregate over parts is a part too, and only
where every output column has a name of its own, which the view reads the part by.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from sqlglot import exp

from reconciler.desired.analysis.fallback import Fallback
from reconciler.desired.analysis.group_windows import is_window_function
from reconciler.desired.analysis.inline import CannotInline, inline_ctes
from reconciler.desired.analysis.keyed import Columns, Keyed
from reconciler.desired.analysis.memo import ViewFacts
from reconciler.desired.analysis.shapes import Aggregate, analyse
from reconciler.desired.parsing.pipeline_sql import SqlSource
from reconciler.desired.parsing.sql import SPARK, ViewStatement, parse_file
from reconciler.support.errors import ReconcileError

Schemas = Mapping[str, tuple[str, ...] | None]
AnalyseView = Callable[[ViewStatement, Mapping[str, bool], Schemas, Schemas], ViewFacts]
"""Analyses one view statement given whether each relation retracts rows, their columns
and their columns as Spark names them (`desired.model.program`'s own analysis)."""

_ALIAS = re.compile(r"[a-z_][a-z0-9_]*")
"""A derived table's alias a part's name takes; any other alias gives `part`."""

PART_SEPARATOR = "__"
"""Between a view's name and its part's (`q88__s1`)."""


@dataclass(frozen=True)
class Parts:
    """A view's query reading its parts by name, and each part's name, query and columns."""

    query: exp.Query
    parts: tuple[tuple[str, exp.Query, tuple[str, ...]], ...]


@dataclass(frozen=True)
class SplitView:
    """A view read through its parts: its statement over them and what analysing it found,
    and each part's statement and analysis, in the order they are computed."""

    statement: ViewStatement
    facts: ViewFacts
    parts: tuple[tuple[ViewStatement, ViewFacts], ...]


def split_view(statement: ViewStatement, facts: ViewFacts, columns: Schemas,
               resolved: Schemas, retracting: Mapping[str, bool], *, taken: set[str],
               analyse: AnalyseView) -> SplitView | None:
    """A view recomputed as written (`facts`), with its aggregating subqueries as parts, when
    that maintains it and each part; None otherwise, and for a view that asks to be
    recomputed (TBLPROPERTIES), declares a key or has expectations: clauses of its own
    statement, which a part would not carry."""
    if facts.refresh.mode != "full" or facts.refresh.reason is None \
            or facts.refresh.reason.startswith(_CHOSEN) or statement.full_refresh \
            or statement.key or statement.expectations or statement.tree is None:
        return None
    reads: dict[str, tuple[str, ...]] = {}
    for read in statement.reads:
        names = columns.get(read)
        if names is None:  # columns not known for certain: nothing to name a part by
            return None
        reads[read] = names
    found = split_parts(statement.name, statement.tree, reads, taken)
    if found is None:
        return None
    columns, resolved, retracting = dict(columns), dict(resolved), dict(retracting)
    parts = []
    try:  # each part's statement is checked as any is: one refused keeps the view whole
        for name, query, _ in found.parts:
            part = _statement(name, query, statement)
            part_facts = analyse(part, retracting, columns, resolved)
            if part_facts.refresh.mode == "full":
                return None
            parts.append((part, part_facts))
            columns[name], resolved[name] = part_facts.columns, part_facts.resolved
            retracting[name] = part_facts.refresh.retracts
        whole = _statement(statement.name, found.query, statement)
        whole_facts = analyse(whole, retracting, columns, resolved)
    except ReconcileError:
        return None
    if whole_facts.refresh.mode == "full":
        return None
    return SplitView(whole, whole_facts, tuple(parts))


_CHOSEN = ("refresh: full", "TBLPROPERTIES")
"""The start of the reasons a view is recomputed because its project asks for it."""


def _statement(name: str, query: exp.Query, of: ViewStatement) -> ViewStatement:
    """A view statement of `query` named `name`, parsed and checked as any statement is, and
    placed where the statement `of` is written (errors name its line)."""
    text = f"CREATE MATERIALIZED VIEW {name} AS {query.sql(dialect=SPARK)}"
    [parsed] = parse_file(SqlSource(of.location.file, text))
    assert isinstance(parsed, ViewStatement)  # the text is a view's
    return replace(parsed, location=of.location)


def split_parts(view: str, query: exp.Query, columns: Columns,
                taken: set[str]) -> Parts | None:
    """The view `view` (its `query` over relations with `columns`) with its aggregating
    subqueries as parts (none, when the view only windows a grouped derived table, merged
    into it), when each part and the view reading them can be maintained; None otherwise.
    `taken`: names the program already uses (a part never takes one)."""
    try:
        tree = inline_ctes(query).copy()
    except CannotInline:
        return None
    merged = _merged(tree) if isinstance(tree, exp.Select) else None
    if merged is not None:  # the view itself windows a grouped derived table
        tree = merged
    found: dict[str, tuple[str, exp.Query, tuple[str, ...]]] = {}  # by the part's SQL
    _take(tree, view, columns, taken, found)
    if not found and merged is None:
        return None
    parts = tuple(found.values())
    with_parts = {**columns, **{name: names for name, _, names in parts}}
    try:
        analyse(tree, with_parts)
    except Fallback:
        return None
    return Parts(tree, parts)


def _take(node: exp.Expr, view: str, columns: Columns, taken: set[str],
          found: dict[str, tuple[str, exp.Query, tuple[str, ...]]]) -> None:
    """Replace each aggregating subquery under `node` by its part, innermost first: an
    aggregate over parts (a ROLLUP over a UNION ALL of grouped CTEs) is a part too."""
    for child in list(node.iter_expressions()):
        if isinstance(child, exp.Subquery) and isinstance(child.this, exp.Select):
            merged = _merged(child.this)
            if merged is not None:
                child.set("this", merged)
        _take(child, view, columns, taken, found)
        candidate = _candidate(child)
        if candidate is None:
            continue
        candidate = _named(candidate, _first_branch_names(child, found)
                           if _later_branch(child) else None)
        if candidate is None:
            continue
        known = {**columns, **{name: outputs for name, _, outputs in found.values()}}
        if not _maintained(candidate, known):
            continue
        text = candidate.sql(dialect=SPARK)
        if text not in found:
            outputs = _output_names(candidate)
            assert outputs is not None  # `_named` names every column
            found[text] = (_name(view, child, taken, found), candidate, outputs)
        part, _, names = found[text]
        if isinstance(child, exp.Subquery):
            table = exp.to_table(part)
            alias = child.alias
            if alias:
                table.set("alias", exp.TableAlias(this=exp.to_identifier(alias)))
            child.replace(table)
        else:
            child.replace(exp.select(*names).from_(exp.to_table(part)))


def _merged(select: exp.Select) -> exp.Select | None:
    """A select that only names and windows the columns of one aggregating derived table
    (`SELECT item, RANK() OVER (ORDER BY ratio) FROM (SELECT item, SUM(a) / SUM(b) AS ratio
    ... GROUP BY item) AS t`) as that aggregate with its windows over the groups
    (`desired/analysis/group_windows.py`), which can be a part; None for any other select."""
    source = select.args.get("from_") or select.args.get("from")
    if source is None or not isinstance(source.this, exp.Subquery) or any(
            select.args.get(clause) for clause in (
                "joins", "where", "group", "having", "distinct", "order", "limit", "laterals",
                "qualify", "windows", "with_", "with")):
        return None
    inner, alias = source.this.this, source.this.alias.lower()
    if not isinstance(inner, exp.Select) or _candidate(source.this) is None \
            or inner.args.get("distinct") or inner.args.get("having") is not None:
        return None
    names = _output_names(inner)
    if names is None or any(isinstance(item, exp.Star) or item.find(exp.Star)
                            for item in select.expressions):
        return None
    if any(not is_window_function(call) for item in select.expressions
           for call in item.find_all(exp.AggFunc)):
        return None  # an aggregate of the aggregate (`AVG(total)`): not a projection of it
    values: dict[str, exp.Expr] = dict(zip(names, (item.unalias() for item in
                                                   inner.expressions), strict=True))

    def substitute(node: exp.Expr) -> exp.Expr:
        if isinstance(node, exp.Column) and node.name.lower() in values \
                and node.table.lower() in ("", alias):
            return values[node.name.lower()].copy()
        return node

    merged = inner.copy()
    items = []
    for item in select.expressions:
        name = item.alias_or_name
        if not name or item.find(exp.Select):
            return None
        items.append(exp.alias_(item.unalias().transform(substitute), name))
    for column in (column for item in items for column in item.find_all(exp.Column)):
        if column.table.lower() == alias:  # a column the derived table does not have
            return None
    merged.set("expressions", items)
    return merged


def _candidate(node: exp.Expr) -> exp.Query | None:
    """The query `node` is, when it may be a part: an aggregating derived table of a FROM or
    JOIN, or an aggregating branch of a set operation (neither inside an expression
    subquery); or a derived set operation anywhere that reads nothing around it (inside an
    `EXISTS`, where set operations have no key rule of their own)."""
    if isinstance(node, exp.Subquery) and isinstance(node.parent, (exp.From, exp.Join)) \
            and isinstance(node.this, exp.SetOperation):
        return node.this if _self_contained(node.this) else None
    if isinstance(node, exp.SetOperation) and isinstance(node.parent, exp.Subquery) \
            and not isinstance(node.parent.parent, (exp.From, exp.Join)):
        return node if _self_contained(node) else None  # `IN (SELECT ... INTERSECT ...)`
    if isinstance(node, exp.Subquery) and isinstance(node.parent, (exp.From, exp.Join)):
        select = node.this
    elif isinstance(node, exp.Select) and isinstance(node.parent, exp.SetOperation):
        select = node
    else:
        return None
    if not isinstance(select, exp.Select) or _in_expression_subquery(node):
        return None
    groups = select.args.get("group") is not None or any(
        found.parent_select is select and not is_window_function(found)
        for item in select.expressions for found in item.find_all(exp.AggFunc))
    return select if groups else None


def _self_contained(query: exp.Query) -> bool:
    """Whether every column `query` names is qualified by a relation of its own (or not
    qualified at all, and none of its own relations is outside it): it reads nothing of
    the query around it. Unqualified names resolve inside first, as Spark resolves them."""
    own = {table.alias_or_name.lower() for table in query.find_all(exp.Table)} | {
        subquery.alias.lower() for subquery in query.find_all(exp.Subquery) if subquery.alias}
    return all(not column.table or column.table.lower() in own
               for column in query.find_all(exp.Column))


def _in_expression_subquery(node: exp.Expr) -> bool:
    """Whether `node` sits in a subquery used as a value or a condition (it may be
    correlated to the query around it), rather than in a FROM or JOIN."""
    ancestor = node.parent
    while ancestor is not None:
        if isinstance(ancestor, exp.Subquery) and not isinstance(
                ancestor.parent, (exp.From, exp.Join)):
            return True
        if isinstance(ancestor, (exp.Exists, exp.In)):
            return True
        ancestor = ancestor.parent
    return False


def _later_branch(node: exp.Expr) -> bool:
    """Whether `node` is a set operation's branch other than its first, whose columns the
    operation names after the first branch's, whatever its own are called."""
    return isinstance(node.parent, exp.SetOperation) and node.arg_key == "expression"


def _first_branch_names(node: exp.Expr,
                        found: dict[str, tuple[str, exp.Query, tuple[str, ...]]]
                        ) -> tuple[str, ...] | None:
    """The output names of the set operation `node` is a branch of: its first branch's (a
    part already, when that one aggregates: its columns), or None when it has none."""
    top = node.parent
    assert isinstance(top, exp.SetOperation)  # `_later_branch`'s question, asked first
    while isinstance(top.parent, exp.SetOperation):
        top = top.parent
    first: exp.Expr = top
    while isinstance(first, exp.SetOperation):
        first = first.this
    while isinstance(first, exp.Subquery):
        first = first.this
    if not isinstance(first, exp.Select):
        return None
    return _output_names(first)


def _named(query: exp.Query, names: tuple[str, ...] | None) -> exp.Query | None:
    """`query` (a copy) when each of its output columns has a name of its own, or, for a
    set operation's later branch, named as the operation names them (`names`, its first
    branch's); else None."""
    copy = query.copy()
    if names is not None and isinstance(copy, exp.Select):
        if len(names) != len(copy.expressions):
            return None
        copy.set("expressions", [exp.alias_(item.unalias(), name)
                                 for item, name in zip(copy.expressions, names, strict=True)])
    return copy if _output_names(copy) is not None else None


def _output_names(query: exp.Expr) -> tuple[str, ...] | None:
    """Each output column's own name (an alias or a column; a set operation's are its first
    branch's), distinct; None otherwise."""
    while isinstance(query, (exp.SetOperation, exp.Subquery)):
        query = query.this
    if not isinstance(query, exp.Select):
        return None
    names = []
    for item in query.expressions:
        if isinstance(item, exp.Alias):
            names.append(item.alias.lower())
        elif isinstance(item, exp.Column) and not isinstance(item.this, exp.Star):
            names.append(item.name.lower())
        else:
            return None
    return tuple(names) if len(set(names)) == len(names) else None


def _maintained(query: exp.Query, columns: Columns) -> bool:
    """Whether `query` is maintained on its own: an aggregate by the aggregate rule or
    recomputed over the keys a step touches, a set operation by any rule."""
    try:
        shape = analyse(query.copy(), columns)
    except Fallback:
        return False
    return isinstance(query, exp.SetOperation) or isinstance(shape, (Aggregate, Keyed))


def _name(view: str, node: exp.Expr, taken: set[str],
          found: dict[str, tuple[str, exp.Query, tuple[str, ...]]]) -> str:
    """`<view>__<alias>` (a derived table's alias) or `<view>__part<n>`, free in the program."""
    alias = node.alias.lower() if isinstance(node, exp.Subquery) and node.alias else "part"
    if not _ALIAS.fullmatch(alias):  # a quoted alias (`a b`) is no name to give a relation
        alias = "part"
    used = taken | {name for name, _, _ in found.values()}
    base = f"{view}{PART_SEPARATOR}{alias}"
    name, number = base, 1
    while name in used:
        number += 1
        name = f"{base}{number}"
    return name
