"""Small readers of sqlglot query trees shared by the maintenance analyses."""

from __future__ import annotations

from sqlglot import exp


def occurrences(query: exp.Expr) -> list[exp.Table]:
    """Every relation occurrence of the query, subqueries included, in a stable order."""
    return list(query.find_all(exp.Table))


def relations_named(sql: str) -> set[str]:
    """The names (lower case) every relation occurrence of a statement's text has, subqueries
    and CTE names included: what a statement can read, so only those need registering."""
    import sqlglot

    from reconciler.desired.parsing.sql import DIALECT

    return {table.name.lower() for table in occurrences(sqlglot.parse_one(sql, read=DIALECT))}


def function_name(window: exp.Window) -> str:
    """A window's function as Spark spells it (`ROW_NUMBER`, not sqlglot's `ROWNUMBER`)."""
    function: exp.Expr = window.this
    return function.sql(dialect="spark").split("(", 1)[0].strip().upper()


def aggregates_rows(select: exp.Select) -> bool:
    """Whether the select list aggregates its rows (an aggregate outside any window)."""
    return any(node.find_ancestor(exp.Window) is None and node.parent_select is select
               for part in select.expressions for node in part.find_all(exp.AggFunc))


def set_branches(query: exp.Expr) -> list[exp.Select]:
    """The selects a derived table's query combines: a set operation's branches, or one."""
    if isinstance(query, (exp.Union, exp.Except, exp.Intersect)):
        return [*set_branches(query.this), *set_branches(query.expression)]
    if isinstance(query, exp.Subquery):
        return set_branches(query.this)
    if not isinstance(query, exp.Select):
        raise ValueError(f"derived table of a {query.key.upper()} query")
    return [query]


def coalesced_columns(node: exp.Expr) -> list[exp.Column] | None:
    """The columns of `COALESCE(a, b, ...)`, or of its spelling out
    `CASE WHEN a IS NOT NULL THEN a ELSE b END` (TPC-DS q51's merged key of a FULL JOIN)
    or `CASE WHEN a IS NULL THEN b ELSE a END`, in the order they are tried; None for
    anything else."""
    if isinstance(node, exp.Coalesce):
        parts = [node.this, *node.expressions]
        columns = [part for part in parts if isinstance(part, exp.Column)]
        return columns if len(columns) == len(parts) else None
    if not isinstance(node, exp.Case) or len(node.args.get("ifs") or []) != 1 \
            or node.this is not None:
        return None
    branch = node.args["ifs"][0]
    condition, then, otherwise = branch.this, branch.args.get("true"), node.args.get("default")
    if not (isinstance(then, exp.Column) and isinstance(otherwise, exp.Column)):
        return None
    negated = isinstance(condition, exp.Not)
    test = condition.this if negated else condition
    if not (isinstance(test, exp.Is) and isinstance(test.expression, exp.Null)
            and isinstance(test.this, exp.Column)):
        return None
    first, second = (then, otherwise) if negated else (otherwise, then)
    return [first, second] if test.this == first else None


def conjuncts(condition: exp.Expr | None) -> list[exp.Expr]:
    """The top-level AND-ed parts of a condition."""
    if condition is None:
        return []
    if isinstance(condition, exp.And):
        return [*conjuncts(condition.this), *conjuncts(condition.expression)]
    if isinstance(condition, exp.Paren):
        return conjuncts(condition.this)
    return [condition]


def from_of(select: exp.Select) -> exp.Expr | None:
    """The relation (or derived table) of a select's FROM."""
    source = select.args.get("from_") or select.args.get("from")  # sqlglot 30: `from_`
    return source.this if source is not None else None


def expression_key(node: exp.Expr, *, bare: bool = False) -> tuple[object, ...]:
    """A key to compare expressions by: unquoted names lower-cased, a column's qualifier
    dropped if `bare`. Built by walking the tree, without copying or generating SQL
    (plan speed: it is asked per key and per aggregate of every view)."""
    if bare and isinstance(node, exp.Column):
        node = node.this
    return _key_of(node)


def _key_of(value: object) -> tuple[object, ...]:
    if isinstance(value, exp.Identifier):
        name = value.name if value.quoted else value.name.lower()
        return ("identifier", name, bool(value.quoted))
    if isinstance(value, exp.Expression):
        return (value.key, *((key, _key_of(arg)) for key, arg in sorted(value.args.items())
                             if arg is not None and arg != [] and arg is not False))
    if isinstance(value, list):
        return ("list", *(_key_of(item) for item in value))
    return ("value", value)
