"""The columns that identify a view's rows, when its query says so: its GROUP BY keys.

A data preview (`engine/preview/counts.py`) counts rows *changed* (a key removed and added
again with other values) only for views with such a key; others report rows added
and removed. The key is taken from the query alone, so it needs no Spark: each
`GROUP BY` expression must be an output column (by position, by alias, or as the
same expression), else the view has no key here.

A view may declare its key (`TBLPROPERTIES ('key' = 'id, day')`), which comes first.
Without one, a view without `GROUP BY` has a key too when it keeps a table's primary key
(`kept_primary_key`): it reads that one table (no join, no generator that repeats a row)
and outputs every key column as it is, perhaps renamed, so its rows are as unique as
the table's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import sqlglot
from sqlglot import exp

from reconciler.desired.analysis.inline import CannotInline, inline_ctes
from reconciler.desired.parsing.sql import DIALECT, ViewStatement


def output_key(statement: str, primary_keys: Mapping[str, Sequence[str]] | None = None
               ) -> list[str] | None:
    """The output names of a view's GROUP BY keys (its `CREATE VIEW` statement or query),
    or None when it has none (or one is not an output column, or the grouping is
    ROLLUP/CUBE/GROUPING SETS); without GROUP BY, the primary key it keeps of one of
    `primary_keys` (table name -> its key columns)."""
    try:
        parsed = sqlglot.parse_one(statement, dialect=DIALECT)
    except sqlglot.errors.ParseError:
        return None
    declared = _declared(parsed)
    if declared:
        return declared
    tree = _query(parsed)
    if not isinstance(tree, exp.Select):
        return None
    group = tree.args.get("group")
    if group is None or not group.expressions:
        return kept_primary_key(tree, primary_keys or {})
    items = tree.expressions
    names: list[str] = []
    for key in group.expressions:
        name = _output_name(key, items)
        if name is None:
            return None
        names.append(name)
    return names


def _declared(tree: exp.Expr) -> list[str] | None:
    """The view's own `TBLPROPERTIES ('key' = 'a, b')` (`desired.parsing.sql.declared_key`)."""
    properties = tree.args.get("properties") if isinstance(tree, exp.Create) else None
    for prop in properties.expressions if properties else []:
        if isinstance(prop, exp.Property) and prop.name.lower() == "key":
            return [part.strip() for part in prop.args["value"].name.split(",")]
    return None


def _query(tree: exp.Expr) -> exp.Expr | None:
    try:
        return inline_ctes(tree.expression if isinstance(tree, exp.Create) else tree)
    except CannotInline:
        return None


def check_declared_key(statement: ViewStatement, columns: tuple[str, ...] | None) -> None:
    """A declared key names output columns of the view (`columns`, None when unknown)."""
    outputs = {column.lower() for column in columns or ()}
    for name in statement.key if columns is not None else ():
        if name.lower() not in outputs:
            raise statement.location.error(
                f"view '{statement.name}': key column '{name}' is not one of its output "
                f"columns ({', '.join(columns or ())})")


def kept_primary_key(select: exp.Select, primary_keys: Mapping[str, Sequence[str]]
                     ) -> list[str] | None:
    """The output names of the primary key of the one table `select` reads, when every key
    column is an output column as it is; None when the query could repeat a key (a join, a
    generator, an aggregate) or drops a key column."""
    source = select.args.get("from_")
    if (source is None or not isinstance(source.this, exp.Table) or select.args.get("joins")
            or select.args.get("laterals") or select.find(exp.AggFunc, exp.Explode, exp.Unnest)):
        return None
    key = primary_keys.get(source.this.name.lower()) or primary_keys.get(source.this.name)
    if not key:
        return None
    outputs = {item.unalias().name.lower(): item.alias_or_name for item in select.expressions
               if isinstance(item.unalias(), exp.Column)}
    names = [outputs.get(column.lower()) for column in key]
    return None if None in names else [name for name in names if name is not None]


def _output_name(key: exp.Expr, items: list[exp.Expr]) -> str | None:
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
