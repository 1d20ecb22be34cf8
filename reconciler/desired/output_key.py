"""The columns that identify a view's rows, when its query says so: its GROUP BY keys.

A data preview (`engine/preview_counts.py`) counts rows *changed* (a key removed and added
again with other values) only for views with such a key; others report rows added
and removed. The key is taken from the query alone, so it needs no Spark: each
`GROUP BY` expression must be an output column (by position, by alias, or as the
same expression), else the view has no key here.
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from reconciler.desired.inline import CannotInline, inline_ctes
from reconciler.desired.sql import DIALECT


def output_key(statement: str) -> list[str] | None:
    """The output names of a view's GROUP BY keys (its `CREATE VIEW` statement or query),
    or None when it has none (or one is not an output column, or the grouping is
    ROLLUP/CUBE/GROUPING SETS)."""
    try:
        tree = sqlglot.parse_one(statement, dialect=DIALECT)
        if isinstance(tree, exp.Create):
            tree = tree.expression
        tree = inline_ctes(tree)
    except (CannotInline, sqlglot.errors.ParseError):
        return None
    group = tree.args.get("group") if isinstance(tree, exp.Select) else None
    if group is None or not group.expressions:
        return None
    assert isinstance(tree, exp.Select)
    items = tree.expressions
    names: list[str] = []
    for key in group.expressions:
        name = _output_name(key, items)
        if name is None:
            return None
        names.append(name)
    return names


def _output_name(key: exp.Expression, items: list[exp.Expression]) -> str | None:
    if isinstance(key, (exp.Rollup, exp.Cube, exp.GroupingSets)):
        return None
    if isinstance(key, exp.Literal) and not key.is_string:
        position = int(key.this)
        return items[position - 1].alias_or_name if 1 <= position <= len(items) else None
    for item in items:
        if isinstance(key, exp.Column) and not key.table and isinstance(item, exp.Alias) \
                and item.alias.lower() == key.name.lower():
            return item.alias_or_name
        if item.unalias() == key:
            return item.alias_or_name
    return None
