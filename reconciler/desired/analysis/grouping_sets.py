"""ROLLUP, CUBE and GROUPING SETS as the list of grouping sets they stand for.

A grouped view with grouping sets is maintained like any aggregate (`engine/maintenance/
aggregate.py`), with one more state key: `__g`, Spark's grouping id of the row's set (bit
`n-1-j` set when key `j` is not in it, as `GROUPING_ID()` counts), so a rolled-up row
(its key NULL because it was rolled up) and a group whose key is NULL stay apart.

Spark's rules, kept here: `GROUP BY a, ROLLUP(b, c)` is the cross product of its parts
(`(a, b, c)`, `(a, b)`, `(a)`); `WITH ROLLUP`/`WITH CUBE` roll up the plain keys; the keys
are every expression named, in the order they first appear; `GROUPING_ID` takes no
arguments or exactly the keys in that order; over no input rows no set has a row (not even
the grand total). Spark repeats a set named twice (its rows twice): refused here, as is a
CUBE of more than `MAX_SETS` sets, whose state would hold that many copies of every row.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Hashable

from sqlglot import exp

from reconciler.desired.analysis.fallback import Fallback

MAX_SETS = 64

GroupingSets = tuple[tuple[int, ...], ...]


def grouping_sets(group: exp.Group, resolve: Callable[[exp.Expr], exp.Expr],
                  normal: Callable[[exp.Expr], Hashable]
                  ) -> tuple[list[exp.Expr], GroupingSets]:
    """The GROUP BY's keys (each `resolve`d: a position or alias to its expression) and its
    grouping sets as key indices; no sets for a plain GROUP BY."""
    keys: list[exp.Expr] = []
    index: dict[Hashable, int] = {}

    def key_of(node: exp.Expr) -> int:
        key = resolve(node.this if isinstance(node, exp.Paren) else node)
        found = index.setdefault(normal(key), len(keys))
        if found == len(keys):
            keys.append(key)
        return found

    plain: list[int] = []
    parts: list[list[tuple[int, ...]]] = []
    for element in group.expressions:
        if isinstance(element, exp.Rollup):
            parts.append(_rollup([key_of(e) for e in element.expressions]))
        elif isinstance(element, exp.Cube):
            parts.append(_cube([key_of(e) for e in element.expressions]))
        elif isinstance(element, exp.GroupingSets):
            parts.append([_one_set(item, key_of) for item in element.expressions])
        else:
            plain.append(key_of(element))
    if group.args.get("rollup"):  # GROUP BY a, b WITH ROLLUP
        parts.append(_rollup(plain))
        plain = []
    if group.args.get("cube"):
        parts.append(_cube(plain))
        plain = []
    if not parts:
        return keys, ()
    sets: list[tuple[int, ...]] = [tuple(plain)]
    for part in parts:
        sets = [left + right for left in sets for right in part]
        if len(sets) > MAX_SETS:
            raise Fallback(f"GROUP BY with more than {MAX_SETS} grouping sets")
    normalised = [tuple(sorted(set(members))) for members in sets]
    if len(set(normalised)) != len(normalised):
        raise Fallback("GROUP BY with a grouping set twice (Spark outputs its rows twice)")
    return keys, tuple(normalised)


def grouping_id(members: tuple[int, ...], keys: int) -> int:
    """Spark's GROUPING_ID() of a set: bit n-1-j set when key j is rolled up."""
    return sum(1 << (keys - 1 - j) for j in range(keys) if j not in members)


def grouping_call(node: exp.Grouping | exp.GroupingId, keys: list[exp.Expr],
                  sets: GroupingSets, find: Callable[[exp.Expr], int | None]
                  ) -> exp.Column:
    """GROUPING(k) as the column `__grp<j>` and GROUPING_ID(...) as `__g` (both computed
    from the state's `__g` by `output_rows`)."""
    if not sets:
        raise Fallback(f"{node.key.upper()} without ROLLUP, CUBE or GROUPING SETS")
    arguments = node.expressions
    if isinstance(node, exp.GroupingId):
        if arguments and [find(argument) for argument in arguments] != list(range(len(keys))):
            raise Fallback("GROUPING_ID of other columns than the GROUP BY's, in its order")
        return exp.column("__g")
    found = find(arguments[0]) if len(arguments) == 1 else None
    if found is None:
        raise Fallback("GROUPING of something other than one GROUP BY key")
    return exp.column(f"__grp{found}")


def _rollup(members: list[int]) -> list[tuple[int, ...]]:
    return [tuple(members[:size]) for size in range(len(members), -1, -1)]


def _cube(members: list[int]) -> list[tuple[int, ...]]:
    if 1 << len(members) > MAX_SETS:
        raise Fallback(f"GROUP BY CUBE of more than {MAX_SETS} grouping sets")
    return [chosen for size in range(len(members), -1, -1)
            for chosen in itertools.combinations(members, size)]


def _one_set(item: exp.Expr, key_of: Callable[[exp.Expr], int]
             ) -> tuple[int, ...]:
    """One entry of GROUPING SETS: `(a, b)`, `(a)`, `a` or `()`."""
    if isinstance(item, (exp.Rollup, exp.Cube, exp.GroupingSets)):
        raise Fallback(f"{item.key.upper()} inside GROUPING SETS")
    if isinstance(item, exp.Tuple):
        return tuple(key_of(member) for member in item.expressions)
    return (key_of(item),)
