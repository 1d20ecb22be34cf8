"""Window functions over an aggregate's groups: `SUM(SUM(x)) OVER (PARTITION BY c)`, a
`RANK() OVER (ORDER BY SUM(x))` of the groups, in the select that groups.

Spark evaluates such a window after grouping and HAVING, over one row per group, so the
aggregate rule keeps it as it keeps any expression over the groups: its state holds
every group's values, and the view's rows are its select list over them
(`engine.maintenance.aggregate.output_rows`), windows included. One changed group can
move every rank or share of its partition (of every group, without PARTITION BY), so a
step rewrites the view from the whole state (`Aggregate.windowed`): what it reads is the
state, one row per group, never the relations the groups come from.

A window's own function (the `SUM` of `SUM(SUM(x)) OVER`, the `RANK`) is evaluated over
the groups; the aggregates inside it, in its PARTITION BY and in its ORDER BY are the
select's own, kept in the state like any other.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

_NULL_HANDLING = (exp.IgnoreNulls, exp.RespectNulls)


def windows_of(select: exp.Select) -> list[exp.Window]:
    """The select's own window functions (a subquery's are its own)."""
    return [window for window in select.find_all(exp.Window) if window.parent_select is select]


def own_function(window: exp.Window) -> exp.Expr:
    """The function a window evaluates (`FIRST_VALUE(x) IGNORE NULLS`: the `FIRST_VALUE`)."""
    function: exp.Expr = window.this
    while isinstance(function, _NULL_HANDLING):
        function = function.this
    return function


def is_window_function(node: exp.Expr) -> bool:
    """Whether `node` is the function a window evaluates, not an aggregate of the groups."""
    window = node.find_ancestor(exp.Window)
    return window is not None and own_function(window) is node


def over_groups(window: exp.Window, rewrite: Callable[[exp.Expr], exp.Expr]) -> exp.Window:
    """`window` evaluated over the groups' rows: its function's arguments, PARTITION BY and
    ORDER BY each rewritten by `rewrite` (an expression over the group's keys and
    aggregate values); the function itself kept."""
    copy = window.copy()
    function = own_function(copy)
    for key, value in list(function.args.items()):
        if isinstance(value, exp.Expr):
            function.set(key, rewrite(value))
        elif isinstance(value, list):
            function.set(key, [rewrite(item) if isinstance(item, exp.Expr) else item
                               for item in value])
    copy.set("partition_by", [rewrite(part) for part in copy.args.get("partition_by") or []])
    order = copy.args.get("order")
    if order is not None:
        copy.set("order", rewrite(order))
    return copy
