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
* `Aggregate`: `GROUP BY` (also ROLLUP, CUBE, GROUPING SETS; or a global aggregate, or
  `SELECT DISTINCT`) with COUNT, COUNT(DISTINCT), SUM, AVG, MIN, MAX, STDDEV and
  VARIANCE, `HAVING`, expressions over aggregates and window functions over the groups
  (`desired/analysis/group_windows.py`), over rows that come from a `Linear`, `Keyed` or
  `Derived` select; and a distinct `UNION`/`INTERSECT`/`EXCEPT` no key splits, as
  its rows counted per branch (`desired/analysis/set_operations.py`). Per-group state is kept
  beside the view.
* `Keyed` (`desired/analysis/keyed.py`): outer joins, `EXISTS`/`NOT EXISTS`, `IN
  (subquery)`, correlated subqueries, a `GROUP BY` of the key, derived tables and
  CTEs, window functions partitioned by the key, set operations (`UNION`,
  `INTERSECT`, `EXCEPT`, their `ALL` forms) with the key in one column: a query
  that only combines rows sharing a key, recomputed over the keys a step touches.
* `Derived`: a select over one derived table (`FROM (SELECT ...) AS x`) whose
  own shape is one of these: linear over the derived table's change.

A `WITH` is written out first (`desired/analysis/inline.py`), each CTE as a derived table where
it is used. Everything else (a window function without `PARTITION BY`, `ORDER BY`,
`LIMIT`, other aggregates (`COLLECT_LIST`, `PERCENTILE`, ...), a
subquery over every group, queries with no column equality to split them by) is
recomputed each step. MIN and MAX over an input that retracts rows, and COUNT(DISTINCT)
always, are kept by recomputing the groups a step touches.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from sqlglot import exp

# Re-exported (`as`): the engine catches a shape's Fallback from here.
from reconciler.desired.analysis.factoring import factor_common_conditions
from reconciler.desired.analysis.fallback import Fallback as Fallback
from reconciler.desired.analysis.group_windows import is_window_function, windows_of
from reconciler.desired.analysis.group_windows import over_groups as window_over_groups
from reconciler.desired.analysis.grouping_sets import grouping_call, grouping_sets
from reconciler.desired.analysis.inline import CannotInline, inline_ctes
from reconciler.desired.analysis.keyed import (
    Columns,
    Equated,
    Keyed,
    KeyFallback,
    equated_columns,
    from_of,
    keyed,
)
from reconciler.desired.analysis.query_parts import expression_key
from reconciler.desired.analysis.set_operations import as_aggregate
from reconciler.desired.parsing.sql import SPARK, parse_query

AggregateFunction = Literal["count", "count_distinct", "sum", "avg", "min", "max",
                            "stddev_samp", "stddev_pop", "var_samp", "var_pop"]

_FUNCTIONS: dict[type[exp.Expr], AggregateFunction] = {
    exp.Count: "count", exp.Sum: "sum", exp.Avg: "avg", exp.Min: "min", exp.Max: "max",
    exp.Stddev: "stddev_samp", exp.StddevSamp: "stddev_samp", exp.StddevPop: "stddev_pop",
    exp.Variance: "var_samp", exp.VariancePop: "var_pop"}




@dataclass(frozen=True)
class Linear:
    """Selects over tables with inner joins and filters, combined by UNION ALL.
    `equated[i]`: the classes of columns branch i's equalities make equal, by which a
    join's change restricts the other relations (`keyed.equated_columns`)."""

    branches: tuple[exp.Select, ...]
    equated: tuple[Equated, ...]


@dataclass(frozen=True)
class AggregateCall:
    function: AggregateFunction
    argument: exp.Expr | None  # None: COUNT(*)


@dataclass(frozen=True)
class Aggregate:
    """A grouped (or global, or DISTINCT) select.

    `source` (a `Linear`, `Keyed` or `Derived` select) computes, per input row, the
    group keys as `__k<j>` and each aggregate's argument as `__a<i>`. `output` is the
    view's select list with every key replaced by `__k<j>` and every aggregate by
    `__agg<i>`, evaluated over one row per group; `having` likewise.
    """

    source: Source
    keys: int
    calls: tuple[AggregateCall, ...]
    output: tuple[exp.Expr, ...]
    having: exp.Expr | None
    is_global: bool
    sets: tuple[tuple[int, ...], ...] = ()
    """ROLLUP, CUBE, GROUPING SETS: the key indices of each grouping set (`grouping_sets.py`);
    empty for a plain GROUP BY. The output's GROUPING(k) reads `__grp<j>`."""
    windowed: bool = False
    """The output has window functions over the groups (`group_windows.py`): a step
    rewrites the view from the whole state."""


@dataclass(frozen=True)
class Derived:
    """A select over one derived table (a subquery in FROM), linear over it: its change is
    its own projection and filter of the derived table's change (`inner`'s shape)."""

    select: exp.Select
    inner: Source


Source = Linear | Keyed | Derived  # what an aggregate's rows come from (no state of their own)
Shape = Linear | Aggregate | Keyed | Derived


def analyse(query: str | exp.Query, columns: Columns) -> Shape:
    """The maintainable shape of a query (its SQL or tree), or `Fallback` with the reason.
    `columns` names each relation's columns (unqualified names are resolved with them)."""
    tree = parse_query(query) if isinstance(query, str) else query
    try:
        tree = factor_common_conditions(inline_ctes(tree))
    except CannotInline as reason:
        raise Fallback(str(reason)) from None
    shape = _analyse(tree, columns)
    for inexact in tree.find_all(*_INEXACT):
        if isinstance(shape, Keyed) and shape.output_key is not None:
            break  # a keyed view's stored rows are found by their key column (`outer.py`)
        if isinstance(shape, Aggregate) and inexact.parent_select is tree:
            continue  # the aggregate's own: its rows before are computed from its state
        # a recomputed retraction must match the stored row bit for bit
        raise Fallback(f"{_name(inexact)}: a floating-point result recomputed for a "
                       "retraction can differ in its last bits from the stored one")
    return shape


def _analyse(query: exp.Expr, columns: Columns) -> Shape:
    if isinstance(query, (exp.Union, exp.Except, exp.Intersect)):
        try:
            return _linear(_union_branches(query), columns)
        except Fallback:
            try:  # any set operation whose branches share a key, as a derived table
                return keyed(_over_derived(query), columns, _check_clauses)
            except KeyFallback as reason:
                counted = as_aggregate(query)  # else its rows counted per branch
                if counted is None:
                    raise Fallback(str(reason)) from None
                try:
                    return _aggregate(counted, _aggregates(counted), columns)
                except Fallback:
                    raise Fallback(str(reason)) from None
    if not isinstance(query, exp.Select):
        raise Fallback(f"{query.key.upper()} query")
    calls = _aggregates(query)
    aggregates = bool(calls) or query.args.get("group") is not None \
        or bool(query.args.get("distinct"))
    try:
        _check_select(query)
    except Fallback:
        if isinstance(from_of(query), exp.Subquery) and not query.args.get("joins"):
            return _or_keyed(lambda: _aggregate(query, calls, columns) if aggregates
                             else _derived(query, columns), query, columns)
        try:
            return keyed(query, columns, _check_clauses)
        except KeyFallback as reason:
            if not aggregates:
                raise Fallback(str(reason)) from None
        return _aggregate(query, calls, columns)
    if not aggregates:
        return _linear([query], columns)
    return _or_keyed(lambda: _aggregate(query, calls, columns), query, columns)


_INEXACT = (exp.Stddev, exp.StddevSamp, exp.StddevPop, exp.Variance, exp.VariancePop)
"""Aggregates whose double result depends on the order rows are summed in."""


def _or_keyed(build: Callable[[], Shape], query: exp.Select, columns: Columns) -> Shape:
    """`build()`, or where it falls back (an aggregate with no per-group state rule:
    COUNT(DISTINCT), STDDEV, ...), the query recomputed over the keys a step touches,
    when its GROUP BY has one; else the first reason."""
    try:
        return build()
    except Fallback as reason:
        try:
            return keyed(query, columns, _check_clauses)
        except KeyFallback:
            raise reason from None


def _over_derived(query: exp.Query) -> exp.Select:
    """`SELECT * FROM (<query>) AS __set`: a set operation as a select keyed analysis reads."""
    return exp.select("*").from_(exp.Subquery(this=query.copy(), alias=exp.TableAlias(
        this=exp.to_identifier("__set"))))


def _source(select: exp.Select, columns: Columns) -> Source:
    """The shape of an aggregate's rows: inner joins, a derived table, or keyed."""
    try:
        _check_select(select)
        return _linear([select], columns)
    except Fallback:
        pass
    if isinstance(from_of(select), exp.Subquery) and not select.args.get("joins"):
        return _derived(select, columns)
    try:
        return keyed(select, columns, _check_clauses)
    except KeyFallback as reason:
        raise Fallback(str(reason)) from None


def _derived(select: exp.Select, columns: Columns) -> Derived:
    """A select over one derived table: the outer select must be linear over it."""
    outer = select.copy()
    outer.set("from_" if outer.args.get("from_") else "from",
              exp.From(this=exp.to_table("__derived")))
    _check_select(outer)
    source = from_of(select)
    assert source is not None  # callers pass a select over one derived table
    inner_query = source.this
    inner = analyse(inner_query, columns)
    if isinstance(inner, Aggregate):
        try:
            inner = keyed(inner_query, columns, _check_clauses)
        except KeyFallback:
            raise Fallback("aggregate in a derived table not grouped by a key (give it a "
                           "view of its own)") from None
    return Derived(select, inner)






def _linear(branches: list[exp.Select], columns: Columns) -> Linear:
    return Linear(tuple(branches), tuple(equated_columns(branch, columns)
                                         for branch in branches))


def _union_branches(query: exp.Expr) -> list[exp.Select]:
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
    """Refuses what the `Linear` rule cannot do: subqueries, derived tables, outer joins."""
    _check_clauses(select)
    for node in select.walk():
        if node is not select and isinstance(node, (exp.Subquery, exp.Select, exp.Exists)):
            raise Fallback("subquery")
        if isinstance(node, exp.Window):
            raise Fallback(f"window function {_name(node.this)} not partitioned by a key")
    source = from_of(select)
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


def _check_clauses(select: exp.Select) -> None:
    """Refuses the clauses no shape maintains, in a select or any of its subqueries."""
    for clause, what in (("order", "ORDER BY"), ("limit", "LIMIT"), ("offset", "OFFSET"),
                         ("laterals", "LATERAL VIEW"), ("qualify", "QUALIFY"),
                         ("windows", "WINDOW clause")):
        if select.args.get(clause):
            raise Fallback(what)


def tables_of(select: exp.Select) -> list[exp.Table]:
    """The relation occurrences of a `Linear` select, FROM first, then each JOIN."""
    first = from_of(select)
    assert isinstance(first, exp.Table)
    return [first, *(join.this for join in select.args.get("joins") or [])]


def _aggregates(select: exp.Select) -> list[exp.AggFunc]:
    """The select's aggregate calls (not a window's own function, nor a subquery's): in
    `SUM(SUM(x)) OVER (...)` the inner `SUM(x)`."""
    found: list[exp.AggFunc] = []
    for part in (*select.expressions, select.args.get("having")):
        if part is not None:
            found.extend(node for node in part.find_all(exp.AggFunc)
                         if not isinstance(node, (exp.Grouping, exp.GroupingId))
                         and not is_window_function(node)
                         and node.parent_select is select)
    return found


def _aggregate(select: exp.Select, found: list[exp.AggFunc], columns: Columns) -> Aggregate:
    group = select.args.get("group")
    if group is not None and select.args.get("distinct"):
        raise Fallback("SELECT DISTINCT with GROUP BY")
    if group is not None:
        if group.args.get("all"):
            raise Fallback("GROUP BY ALL")
        keys, sets = grouping_sets(group, lambda key: _group_key(key, select), expression_key)
    elif select.args.get("distinct"):
        keys, sets = [item.unalias() for item in select.expressions], ()
    else:
        keys, sets = [], ()
    for key in keys:
        if isinstance(key, exp.Star) or any(isinstance(n, exp.Star) for n in key.walk()):
            raise Fallback("SELECT DISTINCT *")
        if any(key.find_all(exp.AggFunc)):
            raise Fallback("aggregate in GROUP BY")
    calls: list[AggregateCall] = []
    call_index: dict[tuple[object, ...], int] = {}
    for node in found:
        call = _call(node)
        text = expression_key(node)
        if text not in call_index:
            call_index[text] = len(calls)
            calls.append(call)
    key_index = {expression_key(key): j for j, key in enumerate(keys)}
    bare_index = {expression_key(key, bare=True): j for j, key in enumerate(keys)}

    def key_of(node: exp.Expr) -> int | None:
        j = key_index.get(expression_key(node))
        if j is None and isinstance(node, exp.Column):
            j = bare_index.get(expression_key(node, bare=True))
        return j

    def over_groups(expression: exp.Expr) -> exp.Expr:
        if expression.find(exp.Select):
            raise Fallback("subquery over the groups (in HAVING or the select list)")
        def rewrite(node: exp.Expr) -> exp.Expr:
            # A window over the groups (`desired/analysis/group_windows.py`)
            if isinstance(node, exp.Window):
                return window_over_groups(node, lambda part: part.transform(rewrite))
            if isinstance(node, (exp.Grouping, exp.GroupingId)):
                return grouping_call(node, keys, sets, key_of)
            if isinstance(node, exp.AggFunc):
                return exp.column(f"__agg{call_index[expression_key(node)]}")
            j = key_of(node)
            if j is not None:
                return exp.column(f"__k{j}")
            return node
        rewritten = expression.transform(rewrite)  # transform copies
        for column in rewritten.find_all(exp.Column):
            if not column.name.startswith(("__k", "__agg", "__g")):
                raise Fallback(f"column {column.sql(SPARK)} is neither grouped nor aggregated")
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
    return Aggregate(source=_source(source, columns), keys=len(keys), calls=tuple(calls),
                     output=tuple(output),
                     having=over_groups(having.this) if having is not None else None,
                     is_global=group is None and not select.args.get("distinct"),
                     sets=sets, windowed=bool(windows_of(select)))


def _group_key(key: exp.Expr, select: exp.Select) -> exp.Expr:
    """GROUP BY 2 and GROUP BY an output alias name the select-list expression."""
    if isinstance(key, exp.Literal) and not key.is_string:
        position = int(key.this)
        if not 1 <= position <= len(select.expressions):
            raise Fallback(f"GROUP BY position {position}")
        named: exp.Expr = select.expressions[position - 1].unalias()
        return named
    if isinstance(key, exp.Column) and not key.table:
        for item in select.expressions:
            if isinstance(item, exp.Alias) and item.alias.lower() == key.name.lower() \
                    and not any(isinstance(n, exp.Column) and n.name.lower() == key.name.lower()
                                for n in item.this.walk()):
                aliased: exp.Expr = item.this
                return aliased
    return key


def _call(node: exp.AggFunc) -> AggregateCall:
    if isinstance(node.parent, exp.Filter):
        raise Fallback("aggregate with FILTER")
    function = _FUNCTIONS.get(type(node))
    if function is None:
        raise Fallback(f"aggregate {_name(node)}")
    argument = node.this
    if isinstance(argument, exp.Distinct):
        if function != "count" or len(argument.expressions) != 1:
            raise Fallback(f"{function.upper()}(DISTINCT ...)")
        return AggregateCall("count_distinct", argument.expressions[0])
    if function == "count" and (argument is None or isinstance(argument, exp.Star)):
        return AggregateCall("count", None)
    if node.expressions:
        raise Fallback(f"{function.upper()} with more than one argument")
    return AggregateCall(function, argument)


def _name(node: exp.Expr) -> str:
    """A function's name as Spark spells it (sqlglot's own names differ: ARRAY_AGG)."""
    return node.sql(SPARK).split("(", 1)[0].strip().upper() or node.key.upper()
