"""Which views can be maintained incrementally, and the shape the engine maintains.

A view is *maintained* when each step computes its change (a Z-set: rows with
weight +1 or -1, as in DBSP) from its inputs' changes, instead of recomputing it
from everything stored. This module reads a view's query with sqlglot (no Spark)
and returns either a shape the engine knows a Z-set rule for, or the reason it
falls back to recomputing the view each step. Plan and `validate` show both.

Shapes (the rules themselves are in `engine/maintenance/`):

* `Linear`: `SELECT ... FROM t [JOIN u ON ...]... [WHERE ...]` and `UNION ALL` of
  such selects: projections, filters, scalar expressions and inner (or cross)
  joins. Joins are bilinear, so they are maintained term by term.
* `Aggregate`: the same, then `GROUP BY` (or a global aggregate, or `SELECT
  DISTINCT`) with COUNT, SUM, AVG, MIN and MAX, `HAVING`, and expressions over
  aggregates. Per-group state is kept beside the view.

* `Keyed`: two relations joined by a LEFT, RIGHT or FULL outer equi-join, with
  filters and projections: recomputed over the rows whose join key changed.

Everything else (window functions, semi joins, subqueries, `ORDER BY`,
`LIMIT`, `WITH`, set operations other than `UNION ALL`, other aggregates) is
recomputed each step. MIN and MAX are exact only while their input never
retracts a row, so over an input that can (an aggregate, a recomputed view) they
fall back too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import sqlglot
from sqlglot import exp

from reconciler.spec.sql import DIALECT

RefreshPolicy = Literal["incremental", "incremental_strict", "full"]
AggregateFunction = Literal["count", "sum", "avg", "min", "max"]

_FUNCTIONS: dict[type[exp.Expression], AggregateFunction] = {
    exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max"}


@dataclass(frozen=True)
class Refresh:
    """How a view is kept up to date, and why when it is recomputed."""

    mode: Literal["incremental", "full"]
    reason: str | None = None
    retracts: bool = True  # whether its changes can delete rows (readers' MIN/MAX need not)

    def describe(self) -> str:
        if self.mode == "incremental":
            return "maintained incrementally"
        return f"recomputed each step: {self.reason}"


@dataclass(frozen=True)
class Linear:
    """Selects over tables with inner joins and filters, combined by UNION ALL."""

    branches: tuple[exp.Select, ...]


@dataclass(frozen=True)
class AggregateCall:
    function: AggregateFunction
    argument: exp.Expression | None  # None: COUNT(*)


@dataclass(frozen=True)
class Aggregate:
    """A grouped (or global, or DISTINCT) select over a `Linear` source.

    `source` computes, per input row, the group keys as `__k<j>` and each
    aggregate's argument as `__a<i>`. `output` is the view's select list with
    every key replaced by `__k<j>` and every aggregate by `__agg<i>`, evaluated
    over one row per group; `having` likewise.
    """

    source: exp.Select
    keys: int
    calls: tuple[AggregateCall, ...]
    output: tuple[exp.Expression, ...]
    having: exp.Expression | None
    is_global: bool


@dataclass(frozen=True)
class Keyed:
    """A select over two relations joined by an outer (LEFT, RIGHT or FULL) equi-join.

    Every output row depends only on the input rows sharing its join key, so a step
    recomputes the select over just the rows whose key its changes touch, before and
    after, and the difference is the change: a NULL-padded row is retracted when a
    match appears and comes back when the last match leaves. `keys` names, per
    relation occurrence (FROM first), the column of the equality.
    """

    select: exp.Select
    keys: tuple[str, str]


Shape = Linear | Aggregate | Keyed


class Fallback(Exception):
    """The view is recomputed each step; the message says why."""


def analyse(query: str | exp.Query) -> Shape:
    """The maintainable shape of a query (its SQL or tree), or `Fallback` with the reason."""
    if isinstance(query, str):
        query = sqlglot.parse_one(query, dialect=DIALECT)
    if query.args.get("with_") or query.args.get("with"):  # sqlglot 30 says `with_`
        raise Fallback("WITH clause")
    for node in query.walk():
        if isinstance(node, exp.Window):
            raise Fallback(f"window function {_name(node.this)}")
    if isinstance(query, exp.Union):
        return Linear(tuple(_union_branches(query)))
    if not isinstance(query, exp.Select):
        raise Fallback(f"{query.key.upper()} query")
    keyed = _outer_join(query)
    if keyed is not None:
        return keyed
    _check_select(query)
    calls = [node for node in _aggregates(query)]
    group = query.args.get("group")
    if group is None and not calls and not query.args.get("distinct"):
        return Linear((query,))
    return _aggregate(query, calls)


def refresh_of(query: str | exp.Query, *, opted_out: bool, policy: RefreshPolicy,
               input_retracts: bool) -> Refresh:
    """The refresh of one view, given the policy and whether any of its inputs retracts."""
    if opted_out:
        return Refresh("full", "TBLPROPERTIES ('refresh' = 'full')")
    if policy == "full":
        return Refresh("full", "refresh: full in pipeline.yaml")
    try:
        shape = analyse(query)
    except Fallback as reason:
        return Refresh("full", str(reason))
    if isinstance(shape, Linear):
        return Refresh("incremental", retracts=input_retracts)
    if isinstance(shape, Keyed):  # a match arriving retracts a NULL-padded row
        return Refresh("incremental", retracts=True)
    if input_retracts:
        for call in shape.calls:
            if call.function in ("min", "max"):
                return Refresh("full", f"{call.function.upper()} over an input that can "
                                       "delete rows")
    # A DISTINCT-only view over insert-only input only ever gains rows.
    retracts = input_retracts or bool(shape.calls) or shape.is_global
    return Refresh("incremental", retracts=retracts)


def _union_branches(query: exp.Expression) -> list[exp.Select]:
    if isinstance(query, exp.Union):
        if query.args.get("distinct"):
            raise Fallback("UNION without ALL")
        return [*_union_branches(query.this), *_union_branches(query.expression)]
    if isinstance(query, exp.Subquery):
        return _union_branches(query.this)
    if not isinstance(query, exp.Select):
        raise Fallback(f"{query.key.upper()} query")
    _check_select(query)
    if query.args.get("group") or query.args.get("distinct") or any(_aggregates(query)):
        raise Fallback("aggregate inside UNION ALL")
    return [query]


def _check_select(select: exp.Select) -> None:
    for clause, what in (("order", "ORDER BY"), ("limit", "LIMIT"), ("offset", "OFFSET"),
                         ("laterals", "LATERAL VIEW"), ("qualify", "QUALIFY"),
                         ("windows", "WINDOW clause")):
        if select.args.get(clause):
            raise Fallback(what)
    for node in select.walk():
        if node is not select and isinstance(node, (exp.Subquery, exp.Select, exp.Exists)):
            raise Fallback("subquery")
    source = _from(select)
    if not isinstance(source, exp.Table):
        raise Fallback("FROM without a plain relation")
    for join in select.args.get("joins") or []:
        kind = " ".join(part for part in (join.side, join.kind) if part).upper()
        if kind not in ("", "INNER", "CROSS"):
            raise Fallback(f"{kind} JOIN")
        if join.args.get("method"):
            raise Fallback(f"{join.args['method'].upper()} JOIN")
        if not isinstance(join.this, exp.Table):
            raise Fallback("join with a subquery")


def _outer_join(select: exp.Select) -> Keyed | None:
    """The `Keyed` shape of a select whose only join is an outer equi-join, None when the
    select has no outer join; `Fallback` when it has one that cannot be keyed."""
    joins = select.args.get("joins") or []
    outer = [join for join in joins if (join.side or "").upper() in ("LEFT", "RIGHT", "FULL")]
    if not outer:
        return None
    side = (outer[0].side or "").upper()
    if len(joins) != 1:
        raise Fallback(f"{side} JOIN among more than two relations")
    join = joins[0]
    if (join.kind or "").upper() in ("SEMI", "ANTI") or join.args.get("method"):
        raise Fallback(f"{side} {(join.kind or join.args.get('method') or '').upper()} JOIN")
    select_without_join = select.copy()
    select_without_join.set("joins", [])
    _check_select(select_without_join)
    if not isinstance(join.this, exp.Table):
        raise Fallback("join with a subquery")
    if select.args.get("group") or select.args.get("distinct") or _aggregates(select):
        raise Fallback(f"aggregate over a {side} JOIN (give the join a view of its own)")
    left, right = tables_of(select)
    names = {(t.alias_or_name or t.name).lower(): index for index, t in enumerate((left, right))}
    condition = join.args.get("on")
    for part in _conjuncts(condition) if condition is not None else []:
        if isinstance(part, exp.EQ) and isinstance(part.this, exp.Column) \
                and isinstance(part.expression, exp.Column):
            sides = {names.get(column.table.lower()): column.name.lower()
                     for column in (part.this, part.expression)}
            if set(sides) == {0, 1}:
                return Keyed(select, (sides[0], sides[1]))
    raise Fallback(f"{side} JOIN without an equality of one column from each side")


def _conjuncts(condition: exp.Expression) -> list[exp.Expression]:
    if isinstance(condition, exp.And):
        return [*_conjuncts(condition.this), *_conjuncts(condition.expression)]
    if isinstance(condition, exp.Paren):
        return _conjuncts(condition.this)
    return [condition]


def _from(select: exp.Select) -> exp.Expression | None:
    source = select.args.get("from_") or select.args.get("from")  # sqlglot 30: `from_`
    return source.this if source is not None else None


def tables_of(select: exp.Select) -> list[exp.Table]:
    """The relation occurrences of a `Linear` select, FROM first, then each JOIN."""
    first = _from(select)
    assert isinstance(first, exp.Table)
    return [first, *(join.this for join in select.args.get("joins") or [])]


def _aggregates(select: exp.Select) -> list[exp.AggFunc]:
    found = []
    for part in (*select.expressions, select.args.get("having")):
        if part is not None:
            found.extend(part.find_all(exp.AggFunc))
    return found


def _aggregate(select: exp.Select, found: list[exp.AggFunc]) -> Aggregate:
    group = select.args.get("group")
    if group is not None and select.args.get("distinct"):
        raise Fallback("SELECT DISTINCT with GROUP BY")
    if group is not None:
        if group.args.get("all"):
            raise Fallback("GROUP BY ALL")
        for kind in ("grouping_sets", "rollup", "cube"):
            if group.args.get(kind):
                raise Fallback(f"GROUP BY {kind.replace('_', ' ').upper()}")
        keys = [_group_key(key, select) for key in group.expressions]
    elif select.args.get("distinct"):
        keys = [item.unalias() for item in select.expressions]
    else:
        keys = []
    for key in keys:
        if isinstance(key, exp.Star) or any(isinstance(n, exp.Star) for n in key.walk()):
            raise Fallback("SELECT DISTINCT *")
        if any(key.find_all(exp.AggFunc)):
            raise Fallback("aggregate in GROUP BY")
    calls: list[AggregateCall] = []
    call_index: dict[str, int] = {}
    for node in found:
        call = _call(node)
        text = _normal(node)
        if text not in call_index:
            call_index[text] = len(calls)
            calls.append(call)
    key_index = {_normal(key): j for j, key in enumerate(keys)}
    bare_index = {_normal(key, bare=True): j for j, key in enumerate(keys)}

    def over_groups(expression: exp.Expression) -> exp.Expression:
        def rewrite(node: exp.Expression) -> exp.Expression:
            if isinstance(node, exp.AggFunc):
                return exp.column(f"__agg{call_index[_normal(node)]}")
            j = key_index.get(_normal(node))
            if j is None and isinstance(node, exp.Column):
                j = bare_index.get(_normal(node, bare=True))
            if j is not None:
                return exp.column(f"__k{j}")
            return node
        rewritten = expression.copy().transform(rewrite)
        for column in rewritten.find_all(exp.Column):
            if not column.name.startswith(("__k", "__agg")):
                raise Fallback(f"column {column.sql(DIALECT)} is neither grouped nor aggregated")
        return rewritten

    output = []
    for item in select.expressions:
        inner = item.unalias()
        if isinstance(inner, exp.Star) or (isinstance(inner, exp.Column)
                                           and isinstance(inner.this, exp.Star)):
            raise Fallback("SELECT * with GROUP BY")
        output.append(over_groups(item))
    having = select.args.get("having")
    source = select.copy()
    for clause in ("group", "having", "distinct", "order", "limit"):
        source.set(clause, None)
    source.set("expressions", [
        *(key.copy().as_(f"__k{j}") for j, key in enumerate(keys)),
        *(call.argument.copy().as_(f"__a{i}") for i, call in enumerate(calls)
          if call.argument is not None)])
    if not source.expressions:
        source.set("expressions", [exp.Literal.number(1).as_("__one")])
    return Aggregate(source=source, keys=len(keys), calls=tuple(calls), output=tuple(output),
                     having=over_groups(having.this) if having is not None else None,
                     is_global=group is None and not select.args.get("distinct"))


def _group_key(key: exp.Expression, select: exp.Select) -> exp.Expression:
    """GROUP BY 2 and GROUP BY an output alias name the select-list expression."""
    if isinstance(key, exp.Literal) and not key.is_string:
        position = int(key.this)
        if not 1 <= position <= len(select.expressions):
            raise Fallback(f"GROUP BY position {position}")
        return select.expressions[position - 1].unalias()
    if isinstance(key, exp.Column) and not key.table:
        for item in select.expressions:
            if isinstance(item, exp.Alias) and item.alias.lower() == key.name.lower() \
                    and not any(isinstance(n, exp.Column) and n.name.lower() == key.name.lower()
                                for n in item.this.walk()):
                return item.this
    return key


def _call(node: exp.AggFunc) -> AggregateCall:
    if isinstance(node.parent, exp.Filter):
        raise Fallback("aggregate with FILTER")
    function = _FUNCTIONS.get(type(node))
    if function is None:
        raise Fallback(f"aggregate {_name(node)}")
    argument = node.this
    if isinstance(argument, exp.Distinct):
        raise Fallback(f"{function.upper()}(DISTINCT ...)")
    if function == "count" and (argument is None or isinstance(argument, exp.Star)):
        return AggregateCall("count", None)
    if node.expressions:
        raise Fallback(f"{function.upper()} with more than one argument")
    return AggregateCall(function, argument)


def _name(node: exp.Expression) -> str:
    """A function's name as Spark spells it (sqlglot's own names differ: ARRAY_AGG)."""
    return node.sql(DIALECT).split("(", 1)[0].strip().upper() or node.key.upper()


def _normal(node: exp.Expression, *, bare: bool = False) -> str:
    """Text to compare expressions by: unquoted names lower-cased, qualifiers dropped if `bare`."""
    def lower(part: exp.Expression) -> exp.Expression:
        if isinstance(part, exp.Identifier) and not part.quoted:
            return exp.to_identifier(part.name.lower())
        if bare and isinstance(part, exp.Column) and part.table:
            return exp.column(part.name)
        return part
    return node.copy().transform(lower).sql(DIALECT)
