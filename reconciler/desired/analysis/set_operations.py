"""`UNION`, `INTERSECT` and `EXCEPT` (their distinct forms) as one aggregate, the way DBSP
maintains them: Z-set sums and a distinct.

    A INTERSECT B   =  SELECT c FROM (SELECT c, 1 AS i0, 0 AS i1 FROM A
                                      UNION ALL SELECT c, 0, 1 FROM B)
                       GROUP BY c HAVING SUM(i0) > 0 AND SUM(i1) > 0

`EXCEPT` keeps a row that its first branch has and no other (`SUM(i0) > 0 AND SUM(i1) =
0`), `UNION` every row once (no `HAVING`). GROUP BY treats NULLs as equal, as set
operations do. The aggregate rule then keeps, per distinct row, how many times each
branch has it: a step adds its branches' changes, and a row appears or leaves when its
counts cross zero. This is for the set operations the keyed rule cannot split by a key
(`desired/analysis/partitioning.py`): those with no key in one column of every branch, and those
with a branch read whole. `INTERSECT ALL` and `EXCEPT ALL` keep multiplicities a
per-row state cannot output, so they are not taken here.
"""

from __future__ import annotations

from sqlglot import exp

_KINDS = (exp.Union, exp.Intersect, exp.Except)


def as_aggregate(query: exp.Expr) -> exp.Select | None:
    """`query`, a distinct set operation, as the aggregate above; None for any other query,
    or when its branches' columns cannot be counted."""
    if not isinstance(query, _KINDS) or not query.args.get("distinct"):
        return None
    operands = _branches(query, type(query))
    branches = [branch for branch in operands if isinstance(branch, exp.Select)]
    if len(branches) != len(operands):
        return None  # a set operation of another kind inside: no columns to name
    width = _width(branches[0])
    if width is None or any(_width(branch) != width for branch in branches):
        return None
    columns = [f"__s{i}" for i in range(width)]
    counted = [_counted(branch, columns, position, len(branches))
               for position, branch in enumerate(branches)]
    union: exp.Query = counted[0]
    for branch in counted[1:]:
        union = exp.union(union, branch, distinct=False)
    grouped = exp.select(*columns).from_(exp.Subquery(
        this=union, alias=exp.TableAlias(this=exp.to_identifier("__set")))).group_by(*columns)
    having = _having(type(query), len(branches))
    return grouped.having(having) if having is not None else grouped


def _branches(query: exp.Expr, kind: type[exp.Expr]) -> list[exp.Expr]:
    """The operands of a chain of one kind of set operation, left to right. A `UNION`'s
    `UNION ALL` operands join the chain too: the distinct around them removes copies."""
    while isinstance(query, exp.Subquery):
        query = query.this
    if not isinstance(query, kind) or not (query.args.get("distinct") or kind is exp.Union):
        return [query]
    if kind is exp.Except:  # (A - B) - C: only the first operand chains
        return [*_branches(query.this, kind), query.expression]
    return [*_branches(query.this, kind), *_branches(query.expression, kind)]


def _width(query: exp.Select) -> int | None:
    """The number of output columns of a branch (None with a `*`)."""
    if any(
            isinstance(item, exp.Star) or isinstance(item.unalias(), exp.Star)
            or (isinstance(item, exp.Column) and isinstance(item.this, exp.Star))
            for item in query.expressions):
        return None
    return len(query.expressions)


def _counted(branch: exp.Select, columns: list[str], position: int, count: int
             ) -> exp.Select:
    """`SELECT <branch's columns as columns>, 1 AS __in<position>, 0 AS __in<other>...`."""
    flags = [exp.alias_(exp.Literal.number(1 if i == position else 0), f"__in{i}")
             for i in range(count)]
    select = branch.copy()
    select.set("expressions", [exp.alias_(item.unalias(), name) for item, name in
                               zip(select.expressions, columns, strict=True)] + flags)
    return select


def _having(kind: type[exp.Expr], count: int) -> exp.Expr | None:
    def total(i: int) -> exp.Expr:
        return exp.Sum(this=exp.column(f"__in{i}"))

    if kind is exp.Intersect:
        return exp.and_(*(exp.GT(this=total(i), expression=exp.Literal.number(0))
                          for i in range(count)))
    if kind is exp.Except:
        return exp.and_(exp.GT(this=total(0), expression=exp.Literal.number(0)),
                        *(exp.EQ(this=total(i), expression=exp.Literal.number(0))
                          for i in range(1, count)))
    return None
